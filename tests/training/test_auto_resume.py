"""A run started in a folder holding last.ckpt resumes from it; another model's is refused."""

import subprocess
import sys

import pytest
import torch

from helpers.hydra_compose import ROOT, compose_train
from transformer_nmt.model import TransformerConfig
from transformer_nmt.train import train
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.run_plan import resume_point

TOY = ["experiment=toy", "logger=none"]


def left_checkpoint(tmp_path, d_model: int) -> bytes:
    """A last.ckpt of the toy model (with `d_model`) in tmp_path's run folder; its bytes."""
    trained = TransformerConfig(300, 0, N=2, d_model=d_model, d_ff=128, h=4, max_positions=128)
    path = tmp_path / "run" / "checkpoints" / "last.ckpt"
    path.parent.mkdir(parents=True)
    torch.save({"model_config": trained.to_dict(), "global_step": 7}, path)
    return path.read_bytes()


def test_the_run_folders_last_checkpoint_is_resumed_without_ckpt_path(tmp_path):
    cfg = compose_train(tmp_path, TOY)
    resume, found = resume_point(cfg)
    assert resume.path is None and not found  # a fresh folder
    left_checkpoint(tmp_path, d_model=64)
    resume, found = resume_point(cfg)
    assert resume.path == str(tmp_path / "run" / "checkpoints" / "last.ckpt") and found
    assert cfg.ckpt_path is None  # the run plan holds it, not the config
    given = compose_train(tmp_path, [*TOY, "ckpt_path=/elsewhere/last.ckpt"])
    resume, found = resume_point(given)
    assert resume.path == "/elsewhere/last.ckpt" and not found


def test_a_run_folder_holding_another_models_checkpoint_is_refused_before_any_write(tmp_path):
    saved = left_checkpoint(tmp_path, d_model=64)
    with pytest.raises(ConfigError) as info:
        train(compose_train(tmp_path, [*TOY, "model.d_model=128"]))
    assert "was trained with model.d_model=64" in str(info.value)
    assert "resumed from automatically" in str(info.value)
    assert "hydra.run.dir=" in str(info.value)
    run = tmp_path / "run"
    assert sorted(p.name for p in run.rglob("*")) == ["checkpoints", "last.ckpt"]
    assert (run / "checkpoints" / "last.ckpt").read_bytes() == saved
    assert not (tmp_path / "cache").exists()  # refused before any data was read


@pytest.mark.slow
def test_a_refused_start_leaves_the_run_folders_config_record_as_it_was(tmp_path):
    saved = left_checkpoint(tmp_path, d_model=64)
    record = tmp_path / "run" / ".hydra" / "config.yaml"
    record.parent.mkdir()
    record.write_text("model:\n  d_model: 64\n")  # the record of the run that owns the folder
    refused = subprocess.run(
        [
            sys.executable,
            "train.py",
            *TOY,
            "model.d_model=128",
            f"paths.cache_dir={tmp_path}/cache",
            f"hydra.run.dir={tmp_path}/run",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode != 0
    assert "was trained with model.d_model=64" in refused.stderr
    assert record.read_text() == "model:\n  d_model: 64\n"
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").read_bytes() == saved
