"""Wrong or inconsistent settings fail before training starts, naming the setting."""

import logging
import subprocess
import sys

import pytest
import torch
from hydra.errors import InstantiationException

from helpers.hydra_compose import ROOT, compose_train
from transformer_nmt.checkpoint import CheckpointError
from transformer_nmt.cli.train import HINT
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.model import RNNConfig, TransformerConfig
from transformer_nmt.train import train
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.run_plan import check_config

TOY = ["experiment=toy", "logger=none"]


def train_py(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "train.py", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "override, hydra_says",
    [
        ("model=huge", "Could not find 'model/huge'"),
        ("model.width=1", "Could not override 'model.width'"),
    ],
)
def test_an_unknown_option_or_key_gets_hydras_error_and_our_hint(override, hydra_says):
    out = train_py(override)
    assert out.returncode == 1
    assert hydra_says in out.stderr
    assert HINT in out.stderr
    assert "Traceback" not in out.stderr


def test_d_model_not_divisible_by_h_names_both_unless_d_k_and_d_v_are_given(tmp_path):
    with pytest.raises(ConfigError) as info:
        check_config(compose_train(tmp_path, [*TOY, "model.d_model=66"]))
    assert "model.d_model=66 is not divisible by model.h=4" in str(info.value)
    assert "model.d_k and model.d_v" in str(info.value)
    check_config(
        compose_train(tmp_path, [*TOY, "model.d_model=66", "model.d_k=16", "model.d_v=16"])
    )


def test_rezero_with_norm_first_is_refused_before_any_data_is_read(tmp_path):
    check_config(compose_train(tmp_path, [*TOY, "model.rezero=true"]))
    with pytest.raises(ConfigError, match="model.rezero=true and model.norm_first=true"):
        check_config(compose_train(tmp_path, [*TOY, "model.rezero=true", "model.norm_first=true"]))


def test_a_cooldown_without_a_step_budget_is_refused_before_any_data_is_read(tmp_path):
    with pytest.raises(ConfigError, match=r"module.cooldown_steps=50 needs trainer.max_steps"):
        check_config(compose_train(tmp_path, [*TOY, "module.cooldown_steps=50"]))
    check_config(
        compose_train(tmp_path, [*TOY, "module.cooldown_steps=50", "trainer.max_steps=200"])
    )


def test_a_negative_warmup_is_refused_before_any_data_is_read(tmp_path):
    with pytest.raises(ConfigError, match=r"module.warmup_steps=-5 must be a count of updates"):
        check_config(compose_train(tmp_path, [*TOY, "module.warmup_steps=-5"]))
    check_config(compose_train(tmp_path, [*TOY, "module.warmup_steps=0"]))


def test_max_len_beyond_the_position_table_is_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        overrides = ["data.max_len=200", "data.max_tokens=4096", "data.pad_to_multiple_of=8"]
        check_config(compose_train(tmp_path, [*TOY, *overrides]))
    assert "data.max_len=200 allows batches of 208 positions" in caplog.text  # 201 rounded up
    assert "model.max_positions=128" in caplog.text


def test_max_tokens_below_the_longest_sentence_fails_before_any_data_is_read(tmp_path):
    with pytest.raises(InstantiationException, match=r"max_tokens=32 cannot hold .* max_len=64"):
        train(compose_train(tmp_path, [*TOY, "data.max_tokens=32"]))
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_a_ckpt_path_that_is_no_file_fails_before_any_data_is_read(tmp_path, kind):
    path = tmp_path / "checkpoints"
    if kind == "folder":
        path.mkdir()
    with pytest.raises(ConfigError, match=f"ckpt_path={path} (does not exist|is a folder)"):
        train(compose_train(tmp_path, [*TOY, f"ckpt_path={path}"]))
    assert not (tmp_path / "cache").exists()


def test_several_problems_are_reported_together(tmp_path):
    cfg = compose_train(tmp_path, [*TOY, "model.d_model=65", f"ckpt_path={tmp_path}/x.ckpt"])
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    assert "model.d_model=65" in str(info.value) and "ckpt_path=" in str(info.value)


def test_resuming_with_another_tokenizer_is_refused(tmp_path):
    other = BPETokenizer.train(["some other text"] * 10, vocab_size=270, min_frequency=1)
    torch.save({"state_dict": {}, "tokenizer": other.to_str()}, tmp_path / "other.ckpt")
    with pytest.raises(ConfigError, match="another tokenizer than the one the data settings give"):
        train(compose_train(tmp_path, [*TOY, f"ckpt_path={tmp_path}/other.ckpt"]))


class Payload:
    """Unpickling this would create a file: proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (type(self.marker).touch, (self.marker,))


def test_resuming_from_a_checkpoint_carrying_code_is_refused_before_lightning_loads_it(tmp_path):
    torch.save({"state_dict": {}, "extra": Payload(tmp_path / "ran")}, tmp_path / "evil.ckpt")
    with pytest.raises(CheckpointError, match="could run code"):
        train(compose_train(tmp_path, [*TOY, f"ckpt_path={tmp_path}/evil.ckpt"]))
    assert not (tmp_path / "ran").exists()


def test_resuming_with_other_model_settings_lists_each_before_reading_data(tmp_path):
    # The toy experiment's model=tiny, but with dropout 0.1.
    trained = TransformerConfig(300, 0, N=2, d_model=64, d_ff=128, h=4, max_positions=128)
    path = tmp_path / "last.ckpt"
    torch.save({"model_config": trained.to_dict()}, path)
    with pytest.raises(ConfigError) as info:
        check_config(compose_train(tmp_path, [*TOY, f"ckpt_path={path}", "model.d_model=128"]))
    assert (
        "was trained with model.d_model=64, model.d_k=16, model.d_v=16, model.dropout=0.1; "
        "your config says model.d_model=128, model.d_k=32, model.d_v=32, model.dropout=0.0"
    ) in str(info.value)
    check_config(compose_train(tmp_path, [*TOY, f"ckpt_path={path}", "model.dropout=0.1"]))


def test_resuming_a_checkpoint_of_one_depth_with_a_students_is_refused(tmp_path):
    trained = TransformerConfig(300, 0, N=2, d_model=64, d_ff=128, h=4, max_positions=128)
    saved = trained.to_dict()
    for key in ("N_enc", "N_dec", "d_ff_dec"):
        del saved[key]  # as checkpoints from before each stack had its own
    path = tmp_path / "last.ckpt"
    torch.save({"model_config": saved | {"dropout": 0.0}}, path)
    with pytest.raises(ConfigError) as info:
        check_config(compose_train(tmp_path, [*TOY, f"ckpt_path={path}", "model.N_dec=1"]))
    assert "was trained with model.N_dec=2; your config says model.N_dec=1" in str(info.value)
    check_config(compose_train(tmp_path, [*TOY, f"ckpt_path={path}", "model.N_dec=2"]))


def test_rnn_settings_are_checked_by_the_rnns_rules(tmp_path):
    check_config(compose_train(tmp_path, [*TOY, "model=rnn_attention"]))
    with pytest.raises(ConfigError) as info:
        check_config(
            compose_train(tmp_path, [*TOY, "model=rnn_attention", "model.cell=rnn", "+model.h=3"])
        )
    assert "model.cell='rnn' must be one of gru, lstm" in str(info.value)


def test_a_model_target_of_no_family_is_named(tmp_path):
    with pytest.raises(ConfigError, match="model._target_=torch.nn.Linear: Linear is no model"):
        check_config(compose_train(tmp_path, [*TOY, "model._target_=torch.nn.Linear"]))


def test_resuming_a_checkpoint_of_another_family_is_refused_naming_both(tmp_path):
    path = tmp_path / "last.ckpt"
    trained = RNNConfig(300, 0, hidden_size=128, dropout=0.3, max_positions=256)  # as ours
    torch.save({"model_config": trained.to_dict()}, path)
    with pytest.raises(ConfigError) as info:
        check_config(compose_train(tmp_path, [*TOY, f"ckpt_path={path}"]))
    assert "holds a rnn_attention model; your config builds a transformer model" in str(info.value)
    rnn = ["model=rnn_attention", "model.hidden_size=128"]
    check_config(compose_train(tmp_path, [*TOY, *rnn, f"ckpt_path={path}"]))
    with pytest.raises(ConfigError, match="model.cell=gru; your config says model.cell=lstm"):
        check_config(compose_train(tmp_path, [*TOY, *rnn, "model.cell=lstm", f"ckpt_path={path}"]))


@pytest.mark.skipif(torch.cuda.device_count() >= 4, reason="this machine has 4 GPUs")
@pytest.mark.parametrize(
    "trainer", [["trainer.devices=4"], ["trainer=gpu"], ["trainer=ddp", "trainer.devices=4"]]
)
def test_gpus_asked_for_but_absent_are_named_with_the_cpu_way(tmp_path, trainer):
    with pytest.raises(ConfigError) as info:
        check_config(compose_train(tmp_path, [*TOY, *trainer]))
    assert f"this machine has {torch.cuda.device_count()}" in str(info.value)
    assert "trainer=ddp_cpu" in str(info.value)


@pytest.mark.parametrize(
    "trainer",
    [
        ["trainer.devices=2"],
        ["trainer.devices=-1"],  # every GPU of the machine
        ["trainer=ddp_cpu", "trainer.devices=1", "trainer.num_nodes=2"],
        ["trainer=ddp_cpu", "trainer.devices=1"],
    ],
)
def test_compile_with_ddp_is_refused_naming_the_options(tmp_path, trainer):
    with pytest.raises(ConfigError) as info:
        check_config(compose_train(tmp_path, [*TOY, "module.compile=true", *trainer]))
    assert "module.compile=true is not supported with DDP" in str(info.value)
    assert "set module.compile=false, or train on one device" in str(info.value)


@pytest.mark.parametrize("strategy", ["ddp_spawn", "ddp_spawn_find_unused_parameters_true"])
def test_a_spawning_strategy_is_refused_naming_trainer_ddp(tmp_path, strategy):
    cfg = compose_train(
        tmp_path,
        [*TOY, "trainer.accelerator=cpu", "trainer.devices=2", f"trainer.strategy={strategy}"],
    )
    with pytest.raises(ConfigError) as info:
        check_config(cfg)
    assert f"trainer.strategy={strategy} is not supported" in str(info.value)
    assert "Use trainer=ddp (or trainer=ddp_cpu)" in str(info.value)


@pytest.mark.parametrize("devices", ["trainer.devices=1", "trainer.devices=[0]"])
def test_compile_on_one_device_and_ddp_without_compile_pass(tmp_path, devices):
    check_config(compose_train(tmp_path, [*TOY, "module.compile=true", devices]))
    check_config(compose_train(tmp_path, [*TOY, "trainer=ddp_cpu", "trainer.devices=2"]))
