"""The training step waits for the device once per step, and a few times per logging step, on
one process and on each of 2 DDP ranks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import open_dict

from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT, compose_train
from transformer_nmt.train import train

LOG_EVERY = 4
ACCELERATOR = {"cpu": "cpu", "cuda": "gpu"}


def counted_run(tmp_path: Path, device: str) -> list[str]:
    """Overrides of a 13-step toy run that counts each batch's syncs into tmp_path/syncs.json."""
    return [
        "experiment=toy", "logger=csv", "data.corpus.num_train=300",
        "data.max_tokens=192", "trainer.max_epochs=-1", "trainer.max_steps=13",
        "+trainer.limit_val_batches=0", "+trainer.num_sanity_val_steps=0",
        f"trainer.log_every_n_steps={LOG_EVERY}", "+trainer.enable_progress_bar=true",
        "trainer.precision=32-true", f"trainer.accelerator={ACCELERATOR[device]}",
        "+callbacks.syncs._target_=helpers.sync_counting.SyncsPerBatch",
        f"+callbacks.syncs.path={tmp_path}/syncs.json", f"+callbacks.syncs.device={device}",
    ]  # fmt: skip


def assert_one_sync_a_step(counts_file: Path, logging_at_most: int = 8) -> None:
    counts = json.loads(counts_file.read_text())
    per_batch, where = counts["per_batch"], counts["where"]
    # Lightning writes logs after the batches that start with LOG_EVERY - 1, 2 LOG_EVERY - 1...
    # steps done.
    logging = [n for step, n in per_batch if (step + 1) % LOG_EVERY == 0]
    others = [n for step, n in per_batch if (step + 1) % LOG_EVERY]
    assert len(logging) == 3 and len(others) >= 8, per_batch
    # The finite-loss check: one read of one all-reduced flag. The stop votes ride in the step's
    # all_reduce and are read without a sync (training/run/stop.py).
    assert others == [1] * len(others), where
    # Plus the train metrics brought to the host at once, the global tokens/s put on the device,
    # the periodic checkpoint's clock broadcast, and the logger's reads of the 4 device metrics
    # (grad norm, pad shares, global tokens/s).
    assert max(logging) <= logging_at_most, (per_batch, where)


@pytest.mark.slow
@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
        ),
    ],
)
@pytest.mark.parametrize("budget", [[], ["trainer.max_time=00:01:00:00"]], ids=["steps", "time"])
def test_a_training_step_syncs_once_and_a_logging_step_a_few_times(tmp_path, device, budget):
    """Over 12 steps; on a CPU counted as a GPU would sync (helpers.sync_counting.SyncCounter)."""
    cfg = compose_train(tmp_path, [*counted_run(tmp_path, device), *budget])
    with open_dict(cfg):
        del cfg.hydra  # the CSV logger records the resolved config, but no sweep runs here
    train(cfg)
    assert_one_sync_a_step(tmp_path / "syncs.json")


@pytest.mark.slow
@pytest.mark.parametrize("budget", [[], ["trainer.max_time=00:01:00:00"]], ids=["steps", "time"])
def test_each_of_two_ddp_ranks_syncs_once_a_step(tmp_path, budget):
    """Lightning's per-batch SIGTERM broadcast (a sync each) is gone: only the finite-loss read;
    and with a time budget, its Timer's per-batch broadcast too."""
    command = [
        sys.executable, "train.py", *counted_run(tmp_path, "cpu"), *budget, "trainer=ddp_cpu",
        f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache",
        f"hydra.run.dir={tmp_path}/run",
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, env=ddp_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert_one_sync_a_step(tmp_path / "syncs.json")
    # A rank that receives the clock's broadcast object reads its size and bytes: 4 more.
    assert_one_sync_a_step(tmp_path / "syncs.rank1.json", logging_at_most=12)
