"""`python train.py`'s deliberate errors print their message and hint, not a traceback above it."""

import os
import subprocess
import sys

import pytest

from helpers.hydra_compose import ROOT
from helpers.sweep_runs import TOY_SPACE, train_command
from transformer_nmt.cli.train import HINT
from transformer_nmt.training.run.run_lock import RunLock

TIMEOUT = 300


def run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.mark.slow
def test_a_locked_run_folder_is_a_message_without_a_traceback(tmp_path):
    folder = tmp_path / "run"
    command = [
        sys.executable, "train.py", "experiment=toy", "logger=none", "trainer.precision=32-true",
        f"hydra.run.dir={folder}", f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache",
    ]  # fmt: skip
    with RunLock(folder):
        refused = run(command)
    said = f"RunLockedError: {folder} is in use by another run: process {os.getpid()}"
    assert refused.returncode == 1 and said in refused.stderr, refused.stderr[-3000:]
    assert "Traceback" not in refused.stderr and HINT not in refused.stderr


@pytest.mark.slow
def test_an_unreachable_study_is_a_message_the_traceback_only_with_hydra_full_error(tmp_path):
    storage = "hydra.sweeper.storage=postgresql://me@127.0.0.1:9/optuna"  # nothing listens on 9
    command = train_command(tmp_path, ["hparams_search=multi30k_de_en", *TOY_SPACE, storage])
    refused, full = run(command), run(command, HYDRA_FULL_ERROR="1")
    for out in (refused, full):
        assert out.returncode == 1
        assert "postgresql://me@127.0.0.1:9/optuna cannot be reached" in out.stderr
        assert "Start the database server and create the database first" in out.stderr  # hint
    assert "Traceback" not in refused.stderr and HINT not in refused.stderr
    assert "Traceback" in full.stderr


def test_a_refused_parent_leaves_no_run_folder(tmp_path):
    folder = tmp_path / "run"
    command = [
        sys.executable, "train.py", "experiment=toy", "logger=none", f"hydra.run.dir={folder}",
        f"paths.log_dir={tmp_path}", f"init.from={tmp_path / 'missing.ckpt'}",
    ]  # fmt: skip
    refused = run(command)
    said = f"ConfigError: init.from={tmp_path / 'missing.ckpt'}: "
    assert refused.returncode == 1 and said in refused.stderr, refused.stderr[-3000:]
    assert not folder.exists() and tmp_path.exists()
