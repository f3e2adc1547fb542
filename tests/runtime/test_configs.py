"""Every config in conf/ composes and builds what its `_target_` names."""

import pytest
import torch
from hydra.utils import get_class, instantiate
from lightning.pytorch.loggers import CSVLogger, WandbLogger

from helpers.hydra_compose import CONF, compose_train
from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.model import FAMILIES
from transformer_nmt.training.plan.precision import resolve_precision
from transformer_nmt.training.step.module import TranslationModule


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("name", options("model"))
def test_model_presets_build(tmp_path, name):
    cfg = compose_train(tmp_path, [f"model={name}"])
    model = instantiate(cfg.model, vocab_size=100, pad_id=0)
    assert type(model) is get_class(cfg.model._target_)
    saved = model.config.to_dict()
    assert saved["family"] in FAMILIES
    for key, value in cfg.model.items():
        assert key == "_target_" or value is None or saved[key] == value, key


def test_the_rnn_has_about_the_parameters_of_the_small_transformer(tmp_path):
    """The race compares models of similar size (experiments/transformer_vs_rnn)."""
    with torch.device("meta"):  # sizes only
        rnn, small = (
            instantiate(compose_train(tmp_path, [f"model={name}"]).model, vocab_size=8000, pad_id=0)
            for name in ("rnn_attention", "small")
        )
    n_rnn, n_small = (sum(p.numel() for p in m.parameters()) for m in (rnn, small))
    assert (round(n_rnn / 1e6, 1), round(n_small / 1e6, 1)) == (7.7, 7.6)  # as the YAML says


def test_base_and_big_are_the_papers(tmp_path):
    # Table 3 of the paper: (N, d_model, d_ff, h, P_drop)
    for name, row in {"base": (6, 512, 2048, 8, 0.1), "big": (6, 1024, 4096, 16, 0.3)}.items():
        m = compose_train(tmp_path, [f"model={name}"]).model
        assert (m.N, m.d_model, m.d_ff, m.h, m.dropout) == row
        assert (m.norm_first, m.positions, m.tie_embeddings, m.activation) == (
            False,
            "sinusoidal",
            "all",
            "relu",
        )


def test_module_defaults_are_the_papers(tmp_path):
    cfg = compose_train(tmp_path)
    m = cfg.module
    assert (m.label_smoothing, m.warmup_steps, m.lr_factor, tuple(m.betas), m.eps) == (
        0.1,
        4000,
        1.0,
        (0.9, 0.98),
        1e-9,
    )
    assert cfg.model.N == 6 and cfg.data.tgt_lang == "de" and cfg.data.src_lang == "en"


# data/base.yaml holds what the corpora share; it names no corpus of its own.
@pytest.mark.parametrize("name", [o for o in options("data") if o != "base"])
def test_data_sources_build(tmp_path, name):
    datamodule = instantiate(compose_train(tmp_path, [f"data={name}"]).data)
    assert isinstance(datamodule, TranslationDataModule)


@pytest.mark.parametrize("name", options("trainer"))
def test_trainers_build(tmp_path, name):
    cfg = compose_train(tmp_path, [f"trainer={name}"])
    if cfg.trainer.accelerator == "gpu" and not torch.cuda.is_available():
        pytest.skip("no GPU on this machine: composed only")
    precision = resolve_precision(cfg.trainer.precision, cfg.trainer.accelerator)
    instantiate(cfg.trainer, logger=False, precision=precision)


@pytest.mark.parametrize("name", options("logger"))
def test_loggers_build(tmp_path, name, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = compose_train(tmp_path, [f"logger={name}"])
    loggers = [instantiate(c) for c in (cfg.logger or {}).values()]
    expected = {"wandb": [WandbLogger], "csv": [CSVLogger], "none": []}[name]
    assert len(loggers) == len(expected)
    assert all(isinstance(lg, cls) for lg, cls in zip(loggers, expected, strict=True))


@pytest.mark.parametrize("name", options("callbacks"))
def test_callbacks_build(tmp_path, name):
    cfg = compose_train(tmp_path, [f"callbacks={name}"])
    assert all(instantiate(c) is not None for c in cfg.callbacks.values())


@pytest.mark.parametrize("name", options("experiment"))
def test_experiments_compose_and_build(tmp_path, name):
    cfg = compose_train(tmp_path, [f"experiment={name}"])
    model = instantiate(cfg.model, vocab_size=64, pad_id=0)
    module = instantiate(cfg.module, model=model, tokenizer=None)
    assert isinstance(module, TranslationModule)
    assert isinstance(instantiate(cfg.data), TranslationDataModule)


@pytest.mark.parametrize("name", options("debug"))
def test_debug_overlays_compose(tmp_path, name):
    cfg = compose_train(tmp_path, [f"debug={name}", "data=toy", "model=tiny"])
    instantiate(cfg.trainer, logger=False, precision="32-true")


def test_data_base_leaves_the_languages_to_each_corpus(tmp_path):
    with pytest.raises(Exception, match="src_lang"):
        instantiate(compose_train(tmp_path, ["data=base"]).data)


@pytest.mark.parametrize("name", options("module"))
def test_module_options_build(tmp_path, name):
    cfg = compose_train(tmp_path, [f"module={name}", "model=tiny"])
    model = instantiate(cfg.model, vocab_size=100, pad_id=0)
    assert instantiate(cfg.module, model=model, tokenizer=None).hparams.warmup_steps > 0


def test_en_de_is_the_de_en_recipe_swapped_with_a_cooldown_and_without_r_drop(tmp_path):
    """experiments/multi30k: en->de's figures were measured without R-Drop, which de->en took."""
    de_en, en_de = (
        compose_train(tmp_path, [f"experiment={name}"])
        for name in ("multi30k_de_en", "multi30k_en_de")
    )

    def differ(section):
        return {k for k in de_en[section].keys() | en_de[section].keys()
                if de_en[section].get(k) != en_de[section].get(k)}  # fmt: skip

    assert differ("data") == {"src_lang", "tgt_lang"}
    assert differ("module") == {"cooldown_steps", "rdrop_alpha"}
    assert (de_en.module.rdrop_alpha, en_de.module.rdrop_alpha) == (5, 0)
    assert differ("trainer") == {"max_steps"}
    assert de_en.model == en_de.model
    assert differ("callbacks") == {"timed_cooldown"}  # the cool-down lands by time too
    assert (de_en.callbacks.timed_cooldown.minutes, en_de.callbacks.timed_cooldown.minutes) == (
        0,
        11,
    )


def test_the_multi30k_recipes_end_at_their_records_updates_or_the_hour_and_cool_down_either_way(
    tmp_path,
):
    """experiments/multi30k_sweep: de->en's record hours made 8,445 and 8,638 updates, en->de's
    11,500; a machine too slow for them stops at the hour."""
    for name, updates in (("multi30k_de_en", 8600), ("multi30k_en_de", 11_500)):
        trainer = compose_train(tmp_path, [f"experiment={name}"]).trainer
        assert (trainer.max_steps, trainer.max_time) == (updates, "00:01:00:00"), name
    en_de = compose_train(tmp_path, ["experiment=multi30k_en_de"])
    cooldown = (en_de.module.cooldown_steps, en_de.callbacks.timed_cooldown.minutes)
    assert cooldown == (2300, 11)  # the last 2,300 updates, or the hour's last 11 minutes


def test_the_race_rows_share_data_time_and_validation(tmp_path):
    """experiments/transformer_vs_rnn: the same BPE, batches and hour; only the model differs."""
    transformer, rnn, rezero = (
        compose_train(tmp_path, [f"experiment={name}"])
        for name in ("multi30k_de_en_small", "multi30k_de_en_rnn", "multi30k_de_en_rezero")
    )
    for row in (rnn, rezero):
        assert row.data == transformer.data and row.callbacks == transformer.callbacks
        assert row.trainer.max_time == transformer.trainer.max_time == "00:01:00:00"
        assert row.module.warmup_steps == transformer.module.warmup_steps
    assert rnn.model._target_ == "transformer_nmt.model.rnn.RNNAttention"
    differ = {k for k in transformer.model if transformer.model[k] != rezero.model[k]}
    assert differ == {"rezero"} and rezero.model.rezero
    assert transformer.module == rezero.module and transformer.trainer == rezero.trainer


@pytest.mark.parametrize(
    "name", ["multi30k_de_en_small", "multi30k_de_en_rnn", "multi30k_de_en_rezero"]
)
def test_the_recorded_recipes_train_without_rdrop(tmp_path, name):
    """The hand-tuned recipe and the race's rows were recorded without R-Drop, which the
    experiment they derive from (multi30k_de_en) adopted later."""
    assert compose_train(tmp_path, [f"experiment={name}"]).module.rdrop_alpha == 0
