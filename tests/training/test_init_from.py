"""Fine-tuning with `init.from`: the run starts from the parent's weights and vocabulary, with a
new step count; frozen parts stay bit-identical; bad parents and parts are refused by name; an
extended vocabulary keeps every old token's id and rows."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from helpers.checkpoint_files import SENTENCES, assert_bit_identical, write_checkpoint
from helpers.hydra_compose import ROOT, compose_train
from helpers.multilingual_files import write_parallel
from helpers.quick_toy_run import quick_toy_run
from transformer_nmt.checkpoint import model_weights, read_checkpoint
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.data.tokenizer_kinds import tokenizer_from_str
from transformer_nmt.model.vocab_growth import PER_TOKEN
from transformer_nmt.training.fine_tuning.init_from import load_parent, parent_from_plan
from transformer_nmt.training.fine_tuning.parent_position import BATCHING, position_problems
from transformer_nmt.training.plan.config_checks import ConfigError

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
from helpers.m2m100_folder import write_m2m100_folder  # noqa: E402
from helpers.opus_folder import write_opus_folder  # noqa: E402
from transformer_nmt.export.hf_import import read_folder  # noqa: E402


@pytest.mark.slow
def test_an_imported_model_fine_tunes_with_frozen_parts_unchanged(tmp_path):
    from transformer_nmt.train import train

    write_opus_folder(tmp_path / "opus")
    parent, tokenizer = read_folder(tmp_path / "opus")
    overrides = [
        *quick_toy_run(max_steps=3),
        f"init.from={tmp_path / 'opus'}",
        "init.freeze=[embeddings,encoder]",
        "+data.corpus.max_len=4",  # toy sentences of at most 4 words fit the parent's 64 positions
        "data.max_len=60",
    ]
    with pytest.raises(ConfigError, match="data.bpe_dropout=0.1 drops BPE merges"):
        load_parent(compose_train(tmp_path, [*overrides, "data.bpe_dropout=0.1"]))
    with pytest.raises(ConfigError, match="the parent's is SentencePieceTokenizer's: set init.ext"):
        load_parent(compose_train(tmp_path, [*overrides, "init.extend_vocab=true"]))
    cfg = compose_train(tmp_path, overrides)
    train(cfg)
    checkpoint = read_checkpoint(f"{cfg.paths.output_dir}/checkpoints/last.ckpt")
    assert checkpoint["global_step"] == 3  # a new run's steps, not the parent's
    assert checkpoint["tokenizer"] == tokenizer.to_str()  # the parent's vocabulary
    assert checkpoint["model_config"] == parent.config.to_dict()
    trained = model_weights(checkpoint)
    for name, weight in parent.state_dict().items():
        frozen = name.startswith(("src_embed.", "tgt_embed.", "generator.weight", "encoder."))
        assert torch.equal(trained[name], weight) == frozen, name


@pytest.mark.slow
def test_an_imported_m2m100_model_fine_tunes_on_directions_tagged_as_its_own(tmp_path):
    from transformer_nmt.inference.translator import Translator
    from transformer_nmt.train import train

    write_m2m100_folder(tmp_path / "m2m")
    parent, tokenizer = read_folder(tmp_path / "m2m")
    data = write_parallel(tmp_path / "data", {"train": 40, "val": 8}, languages=("de", "fr"))
    cfg = compose_train(
        tmp_path,
        [
            "data=multi30k_multilingual",
            "logger=csv",
            "data.max_tokens=192",
            "trainer.max_epochs=-1",
            "trainer.max_steps=3",
            "+trainer.limit_val_batches=1",
            "+trainer.num_sanity_val_steps=0",
            "+trainer.enable_progress_bar=false",
            "trainer.precision=32-true",
            "module.max_len_b=5",
            "~callbacks.attention_maps",
            f"data.corpus.path={data}",
            "data.corpus.splits={train: train, val: val, test: val}",
            "data.languages=[de,fr]",
            "data.tag_side=both",  # M2M-100's: each side's language tag
            "data.max_len=32",
            f"init.from={tmp_path / 'm2m'}",
        ],
    )
    datamodule = instantiate(cfg.data)
    datamodule.tokenizer = tokenizer
    datamodule.setup("fit")
    example = datamodule.datasets["train"][0]  # de-fr: `<2de> tokens </s>`, decoder from <2fr>
    tags = {lang: tokenizer.tokens().index(f"<2{lang}>") for lang in ("de", "fr")}
    assert example["src"][0] == tags["de"] and example["bos_id"] == tags["fr"]
    train(cfg)
    last = Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt"
    checkpoint = read_checkpoint(last)
    assert checkpoint["global_step"] == 3
    assert checkpoint["tokenizer"] == tokenizer.to_str()
    assert checkpoint["model_config"] == parent.config.to_dict()
    assert checkpoint["languages"]["tag_side"] == "both"
    trained = model_weights(checkpoint)
    assert any(not torch.equal(trained[name], w) for name, w in parent.state_dict().items())
    translator = Translator.from_checkpoint(last, device="cpu")
    assert len(translator.translate(["eins zwei"], tgt_lang="fr", src_lang="de")) == 1


@pytest.fixture
def checkpoints(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    folder = tmp_path / "parent"
    folder.mkdir()
    for step in (1, 2):
        write_checkpoint(folder / f"step{step}.ckpt", tokenizer, seed=step, step=step)
    return folder


def test_init_from_averages_a_folder_and_freezes_by_path(checkpoints, tmp_path):
    cfg = compose_train(
        tmp_path,
        [
            "model=tiny",
            f"init.from={checkpoints}",
            "init.average_last=2",
            "init.freeze=[decoder.layers.0]",
        ],
    )
    parent = load_parent(cfg)
    first, second = (model_weights(read_checkpoint(checkpoints / f"step{s}.ckpt")) for s in (1, 2))
    for name, weight in parent.model.state_dict().items():
        torch.testing.assert_close(weight, (first[name] + second[name]) / 2)
    frozen = {name for name, p in parent.model.named_parameters() if not p.requires_grad}
    assert frozen and all(name.startswith("decoder.layers.0.") for name in frozen)


def test_the_parent_is_read_once_and_the_other_ranks_build_it_from_the_plans_record(
    checkpoints, tmp_path, monkeypatch
):
    path = checkpoints / "step1.ckpt"
    cfg = compose_train(tmp_path, ["model=tiny", f"init.from={path}", "init.freeze=[encoder]"])
    read, load = [], torch.load
    monkeypatch.setattr(torch, "load", lambda f, *a, **k: read.append(f) or load(f, *a, **k))
    parent = load_parent(cfg)
    assert read == [path]
    record = json.loads(json.dumps(parent.record))  # as the plan hands it to the other ranks
    assert {k: record[k] for k in ("path", "files", "step", "kept", "frozen")} == {
        "path": str(path),
        "files": [str(path)],
        "step": 1,
        "kept": [],
        "frozen": ["encoder"],
    }
    other = parent_from_plan(cfg, record)
    pairs = zip(parent.model.named_parameters(), other.model.parameters(), strict=True)
    for (name, mine), theirs in pairs:
        assert torch.equal(mine, theirs) and mine.requires_grad == theirs.requires_grad, name
    tokenizer = tokenizer_from_str(read_checkpoint(path)["tokenizer"])
    write_checkpoint(path, tokenizer, seed=5, step=1)  # replaced after rank 0 read it
    with pytest.raises(ConfigError, match="its weights differ from those global rank 0 read"):
        parent_from_plan(cfg, record)


@pytest.mark.parametrize("old, new", [("init_from", "init.from"), ("init_keep", "init.keep")])
def test_an_old_init_key_is_refused_naming_its_new_one(tmp_path, old, new):
    cfg = compose_train(tmp_path, ["experiment=toy", f"+{old}=[step]"])
    with pytest.raises(ConfigError, match=rf"^{old}: renamed to {re.escape(new)} \(the init"):
        load_parent(cfg)
    command = [sys.executable, "train.py", f"{old}=x", "experiment=toy"]
    refused = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"error: {old}: renamed to {new} (the init config group, conf/init/); write e.g. "
        "init.from=<checkpoint> init.keep=[step]"
    ]


@pytest.mark.parametrize(
    "setting",
    ["init.keep=[step]", "init.freeze=[encoder]", "init.extend_vocab=true", "init.average_last=2"],
)
def test_a_parent_setting_without_init_from_is_refused_not_ignored(tmp_path, setting):
    with pytest.raises(ConfigError, match=rf"{re.escape(setting)} only apply with init.from="):
        load_parent(compose_train(tmp_path, ["experiment=toy", setting]))
    assert load_parent(compose_train(tmp_path, ["experiment=toy"])) is None


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["model=rnn_attention"], "holds a Transformer .* builds a RNNAttention"),
        (["init.freeze=[decoder.layers.7]"], "'decoder.layers.7' names no weights"),
        (["init.average_last=5"], "fewer than the 5 to average"),
        ([], "a folder \\(step1.ckpt, step2.ckpt\\): name one of its checkpoints, or set init.av"),
        (["data.max_len=2000"], "data.max_len=2000 lets a side reach 2001 positions but the"),
    ],
    ids=["family", "freeze", "average", "folder", "positions"],
)
def test_a_bad_parent_or_part_is_refused_by_name(checkpoints, tmp_path, overrides, named):
    cfg = compose_train(
        tmp_path, ["model=tiny", f"init.from={checkpoints / 'step1.ckpt'}", *overrides]
    )
    if not overrides or "init.average_last=5" in overrides:  # the folder, not one checkpoint
        cfg.init["from"] = str(checkpoints)
    with pytest.raises(ConfigError, match=named):
        load_parent(cfg)


@pytest.mark.slow
def test_an_rnn_parent_keeps_frozen_embeddings_encoder_and_layers_by_index(tmp_path):
    """The RNN family's embeddings, encoder and a layer by index stay bit-identical after steps."""
    from transformer_nmt.train import train

    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "rnn.ckpt", tokenizer, family="rnn_attention")
    cfg = compose_train(
        tmp_path,
        [
            *quick_toy_run(max_steps=2),
            "model=rnn_attention",
            f"init.from={path}",
            "init.freeze=[embeddings,encoder.forward_rnns.0,cells.0]",
        ],
    )
    train(cfg)
    trained = model_weights(read_checkpoint(f"{cfg.paths.output_dir}/checkpoints/last.ckpt"))
    # generator.weight: the output projection tied to the embeddings
    frozen = ("src_embed.", "tgt_embed.", "generator.weight", "encoder.forward_rnns.0.", "cells.0.")
    for name, weight in model_weights(read_checkpoint(path)).items():
        assert torch.equal(trained[name], weight) == name.startswith(frozen), name


@pytest.mark.slow
def test_init_keep_takes_the_parents_optimizer_schedule_and_step_and_by_default_none(
    tmp_path, caplog
):
    """Adam's step counts, the schedule's and the global step continue the parent's 2 steps
    (max_steps=3 trains one more); a new run counts from 0. The log says once what the run
    started from and kept, and every checkpoint's plan records it."""
    from transformer_nmt.train import train

    parent_cfg = compose_train(tmp_path / "parent", quick_toy_run(max_steps=2))
    train(parent_cfg)
    path = f"{parent_cfg.paths.output_dir}/checkpoints/last.ckpt"
    assert read_checkpoint(path)["lr_schedulers"][0]["last_epoch"] == 2
    runs = [("kept", "init.keep=[optimizer,schedule,step]", 3), ("new", "init.keep=[]", 1)]
    for name, keep, step in runs:
        cfg = compose_train(
            tmp_path / name, [*quick_toy_run(max_steps=step), f"init.from={path}", keep]
        )
        caplog.clear()
        with caplog.at_level("INFO", logger="transformer_nmt"):
            train(cfg)
        child = read_checkpoint(f"{cfg.paths.output_dir}/checkpoints/last.ckpt")
        kept = cfg.init.keep
        record = child["run_plan"]["parent"]
        assert (record["files"], record["step"], record["kept"]) == ([path], 2, list(kept)), name
        said = [r.message for r in caplog.records if f"fine-tunes {path} at step 2" in r.message]
        assert len(said) == 1 and f"keeps its {', '.join(kept) or 'weights only'}" in said[0]
        assert child["global_step"] == step, name
        assert child["lr_schedulers"][0]["last_epoch"] == step, name
        steps = {float(s["step"]) for s in child["optimizer_states"][0]["state"].values()}
        assert steps == {float(step)}, name


@pytest.mark.parametrize(
    "keep, named",
    [
        ("[optimizer,epoch]", "init.keep: epoch is no keepable part; name some of optimizer, s"),
        ("[schedule]", "init.keep=\\['schedule'\\] takes one training checkpoint's state, but"),
        ("[step]", "the parent is at step 1, so trainer.max_steps=1 trains nothing: set tra"),
        ("[data]", "init.keep: the checkpoint holds no loops \\(written without training"),
    ],
    ids=["unknown", "average", "step", "no_loops"],
)
def test_init_keep_refuses_unknown_parts_stateless_parents_and_no_steps_left(
    checkpoints, tmp_path, keep, named
):
    averaged = keep == "[schedule]"
    parent = checkpoints if averaged else checkpoints / "step1.ckpt"
    overrides = ["model=tiny", f"init.from={parent}", f"init.keep={keep}", "trainer.max_steps=1"]
    cfg = compose_train(tmp_path, [*overrides, *(["init.average_last=2"] if averaged else [])])
    with pytest.raises(ConfigError, match=named):
        load_parent(cfg)


@pytest.mark.parametrize(
    "recorded, overrides, named",
    [
        (
            {"vocab_size": 512, "min_frequency": 1},
            ["data.vocab_size=1000"],
            r"data.vocab_size=1000 would train another tokenizer than the parent's \("
            r"data.vocab_size=512, {n} tokens\): fine-tuning keeps the parent's vocabulary, so "
            r"set data.vocab_size=512, or init.extend_vocab=true",
        ),
        (
            {"vocab_size": 512, "min_frequency": 2},
            [],
            r"data.min_frequency=1 would train another tokenizer than the parent's \("
            r"data.min_frequency=2, {n} tokens\)",
        ),
        (
            None,
            ["data.vocab_size=270"],
            r"data.vocab_size=270 would train another tokenizer than the parent's, whose "
            r"vocabulary holds {n} tokens: .* set data.vocab_size >= {n}, or init.extend_vocab",
        ),
    ],
    ids=["vocab_size", "min_frequency", "unrecorded"],
)
def test_a_data_config_asking_for_another_vocabulary_is_refused_before_any_write(
    tmp_path, recorded, overrides, named
):
    from transformer_nmt.train import train

    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "parent.ckpt", tokenizer, data=recorded)
    cfg = compose_train(tmp_path, [*quick_toy_run(max_steps=1), f"init.from={path}", *overrides])
    with pytest.raises(ConfigError, match=named.format(n=tokenizer.vocab_size)):
        train(cfg)
    assert not Path(cfg.paths.output_dir).exists()


def test_a_new_corpus_with_the_parents_tokenizer_settings_keeps_its_vocabulary(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    toy = {"vocab_size": 512, "min_frequency": 1}  # conf/data/toy.yaml's, on other sentences
    path = write_checkpoint(tmp_path / "parent.ckpt", tokenizer, data=toy)
    cfg = compose_train(tmp_path, [*quick_toy_run(max_steps=1), f"init.from={path}"])
    assert load_parent(cfg).tokenizer.to_str() == tokenizer.to_str()


@pytest.mark.slow
def test_init_extend_vocab_adds_the_new_corpus_tokens_keeping_old_ids_and_rows(tmp_path):
    """A parent of a 300-token BPE asked for the toy's 512: refused as it is; extended, every old
    token keeps its id and rows, new tokens get new ones, and the run trains and translates."""
    from transformer_nmt.inference.translator import Translator
    from transformer_nmt.train import train

    parent_cfg = compose_train(
        tmp_path / "parent", [*quick_toy_run(max_steps=1), "data.vocab_size=300"]
    )
    train(parent_cfg)
    path = f"{parent_cfg.paths.output_dir}/checkpoints/last.ckpt"
    checkpoint = read_checkpoint(path)
    old = tokenizer_from_str(checkpoint["tokenizer"])
    child = [*quick_toy_run(max_steps=2), f"init.from={path}"]
    refused = compose_train(tmp_path / "refused", child)
    with pytest.raises(ConfigError, match=r"data.vocab_size=512 would .* \(data.vocab_size=300"):
        train(refused)
    assert not Path(refused.paths.output_dir).exists()
    frozen = compose_train(
        tmp_path / "frozen", [*child, "init.extend_vocab=true", "init.freeze=[embeddings]"]
    )
    with pytest.raises(ConfigError, match="rows in src_embed.lut.weight, .* init.freeze would"):
        load_parent(frozen)

    cfg = compose_train(tmp_path / "child", [*child, "init.extend_vocab=true"])
    parent = load_parent(cfg)
    tokens, known = parent.tokenizer.tokens(), old.vocab_size
    assert tokens[:known] == old.tokens() and len(tokens) > known
    for name, weight in parent.model.state_dict().items():
        rows = known if name.startswith(PER_TOKEN) else None
        assert torch.equal(weight[:rows], model_weights(checkpoint)[name]), name
    assert parent.model.src_embed.weight[known:].abs().min(dim=1).values.gt(0).all()
    sentence = "three one twenty"
    assert max(parent.tokenizer.encode_batch([sentence])[0]) >= known  # new tokens in use

    train(cfg)
    last = f"{cfg.paths.output_dir}/checkpoints/last.ckpt"
    trained = read_checkpoint(last)
    assert trained["tokenizer"] == parent.tokenizer.to_str()
    assert trained["model_config"]["vocab_size"] == len(tokens)
    assert trained["global_step"] == 2
    (translation,) = Translator.from_checkpoint(last).translate([sentence], beam_size=1)
    assert isinstance(translation, str)


def test_init_keep_data_refuses_a_parent_that_does_not_record_its_batching(tmp_path):
    cfg = compose_train(tmp_path, quick_toy_run(max_steps=1))
    (problem,) = position_problems(cfg, {"loops": {}, "epoch": 0, "run_plan": {}})
    assert "does not record which batches it trained" in problem


@pytest.mark.parametrize("parents_budget, problem", [(150, None), (192, "max_tokens=150 \\(the")])
def test_init_keep_data_compares_the_budget_as_the_run_plans_it(tmp_path, parents_budget, problem):
    """data.tokens_per_update=300 over batches of 192 tokens: 2 of 150 an update."""
    cfg = compose_train(tmp_path, [*quick_toy_run(max_steps=1), "data.tokens_per_update=300"])
    data = cfg.data
    checkpoint = {
        "datamodule_hyper_parameters": {name: data[name] for name in BATCHING},
        "run_plan": {"max_tokens": parents_budget, "world_size": 1},
        "TranslationDataModule": {
            "train_fingerprint": instantiate(data.corpus).fingerprint("train", "en", "de")
        },
        "epoch": 0,
    }
    problems = position_problems(cfg, checkpoint)
    assert problems == [] if problem is None else re.search(problem, problems[0])


@pytest.mark.slow
def test_init_keep_data_goes_on_with_the_parents_epoch_where_it_stopped(tmp_path):
    """Two steps, then two more in a child keeping optimizer, schedule, step and data, give the
    weights of four steps in one run (the tiny model has no dropout); without data the child
    trains the epoch's first batches again; data alone counts steps anew. Another batching, or
    an epoch limit already reached, is refused by name."""
    from transformer_nmt.train import train

    def run(name: str, steps: int, *overrides: str) -> dict:
        cfg = compose_train(tmp_path / name, [*quick_toy_run(max_steps=steps), *overrides])
        train(cfg)
        return read_checkpoint(f"{cfg.paths.output_dir}/checkpoints/last.ckpt")

    def trained_of_epoch(checkpoint: dict) -> int:
        return checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["processed"]

    straight = model_weights(run("straight", 4))
    run("parent", 2)
    parent = f"init.from={tmp_path / 'parent' / 'run' / 'checkpoints' / 'last.ckpt'}"
    kept = run("kept", 4, parent, "init.keep=[optimizer,schedule,step,data]")
    assert trained_of_epoch(kept) == 4
    for name, weight in model_weights(kept).items():
        assert torch.equal(weight, straight[name]), name
    again = model_weights(run("again", 4, parent, "init.keep=[optimizer,schedule,step]"))
    assert not all(torch.equal(weight, straight[name]) for name, weight in again.items())
    alone = run("alone", 2, parent, "init.keep=[data]")
    assert (alone["global_step"], trained_of_epoch(alone)) == (2, 4)

    other = [*quick_toy_run(max_steps=4), parent, "init.keep=[data]"]
    with pytest.raises(
        ConfigError,
        match=r"data.max_tokens=256 \(the parent's: 192\); match the parent's, or leave data out "
        r"of init.keep; init.keep names data, and the parent is in epoch 0, so trainer.max_epoch",
    ):
        load_parent(
            compose_train(
                tmp_path / "other", [*other, "data.max_tokens=256", "trainer.max_epochs=0"]
            )
        )


@pytest.mark.slow
def test_a_resumed_fine_tuning_run_reads_no_parent_and_goes_on_bit_exact(tmp_path):
    """Its checkpoint holds the weights and vocabulary, and its plan what is frozen: with the
    parent gone after the first part, it goes on as if never stopped, its encoder still frozen;
    an init setting other than the one it started with is refused by name."""
    from transformer_nmt.train import train

    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    parent = write_checkpoint(tmp_path / "parent.ckpt", tokenizer, step=5)
    start = model_weights(read_checkpoint(parent))

    def run(name: str, steps: int, *overrides: str) -> dict:
        child = [f"init.from={parent}", "init.freeze=[encoder]", *overrides]
        cfg = compose_train(tmp_path / name, [*quick_toy_run(max_steps=steps), *child])
        train(cfg)
        return read_checkpoint(f"{cfg.paths.output_dir}/checkpoints/last.ckpt")

    straight = run("straight", 4)
    run("stopped", 2)
    parent.unlink()
    with pytest.raises(
        ConfigError, match=r"init.freeze=\[decoder\] \(it started with \[encoder\]\)"
    ):
        run("stopped", 4, "init.freeze=[decoder]")
    resumed = run("stopped", 4)
    assert_bit_identical(straight, resumed)
    encoder = [name for name in start if name.startswith("encoder.")]
    assert encoder and all(torch.equal(model_weights(resumed)[n], start[n]) for n in encoder)


@pytest.mark.slow
def test_under_ddp_rank_1_builds_the_parent_rank_0_planned(tmp_path):
    """Lightning's launcher starts rank 1 with rank 0's plan: it builds the parent from the
    plan's record, frozen alike, and both ranks train on from the parent's weights."""
    from helpers.ddp import assert_same_weights, ddp_env, weights_callback

    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    parent = write_checkpoint(tmp_path / "parent.ckpt", tokenizer, step=5)
    command = [
        sys.executable, "train.py", *quick_toy_run(max_steps=2), "trainer=ddp_cpu",
        "trainer.devices=2", "logger=none", f"init.from={parent}", "init.freeze=[encoder]",
        f"paths.log_dir={tmp_path}/outputs", f"paths.cache_dir={tmp_path}/cache",
        f"hydra.run.dir={tmp_path}/run", *weights_callback(tmp_path / "weights"),
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, env=ddp_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    weights = assert_same_weights(tmp_path / "weights")
    start = model_weights(read_checkpoint(parent))
    encoder = [name for name in start if name.startswith("encoder.")]
    assert encoder and all(torch.equal(weights[f"model.{n}"], start[n]) for n in encoder)
    trained = "decoder.layers.0.self_attn.w_o.weight"
    assert not torch.equal(weights[f"model.{trained}"], start[trained])
    record = read_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")["run_plan"]["parent"]
    assert (record["files"], record["step"], record["frozen"]) == ([str(parent)], 5, ["encoder"])
