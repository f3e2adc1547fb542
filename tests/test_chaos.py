"""One run of 2 Gloo ranks with dropout and W&B offline, interrupted in turn by a killed rank,
SIGTERMs to both ranks at different points of a step and a disk that fills during a checkpoint
write, restarted each time by the same command: it ends as the uninterrupted run, bit for bit,
with one continuous loss curve in one W&B run.

SLURM's USR1 and requeue (tests/test_slurm.py) and a storage outage under a 2-worker sweep
(tests/training/test_sweep_faults.py) have their own tests; experiments/chaos/ records all.
"""

import errno
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import wandb_records
from helpers.chaos import FILLER, chaos
from helpers.checkpoint_files import assert_bit_identical
from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT
from helpers.quick_toy_run import quick_toy_run
from transformer_nmt.checkpoint import read_checkpoint
from transformer_nmt.training.run.stop import exit_status

MAX_STEPS = 12
# 2 ranks: 7 updates an epoch, validated at its end. A checkpoint every 2 updates. Rank 1 is
# killed as update 4 starts (step 3; last.ckpt: step 2); the SIGTERMs come in update 6, and the
# run stops after it, saving last.ckpt; the disk fills as update 9 starts, after update 8's save,
# so that update 10's last.ckpt does not fit.
KILL_AT, TERM_AT, FILL_AT = 3, 5, 8
# Bytes left free: the periodic checkpoint (weights only) fits, last.ckpt (Adam's moments too,
# 3 times the weights) does not.
ROOM = 1_500_000
TMPFS_SIZE = "16m"  # every checkpoint of the run, and the filler beside them


def command(tmp_path: Path, name: str) -> list[str]:
    return [
        sys.executable, "train.py", *quick_toy_run(MAX_STEPS), "logger=wandb", "trainer=ddp_cpu",
        "model.dropout=0.1", "callbacks.checkpoints.every_n_steps=2",
        f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache",
        f"hydra.run.dir={tmp_path}/{name}",
    ]  # fmt: skip


def run(args: list[str]) -> subprocess.CompletedProcess:
    """One start of both ranks (Lightning's launcher), its output; a hang fails it."""
    env = {**ddp_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    done = subprocess.run(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=600,
    )  # fmt: skip
    return done


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """A tmpfs of TMPFS_SIZE mounted where the interrupted run writes its checkpoints."""
    checkpoints = tmp_path_factory.mktemp("runs") / "chaos" / "checkpoints"
    checkpoints.mkdir(parents=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(checkpoints)]
    mounted = subprocess.run(mount, capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"a small disk needs `mount -t tmpfs` (root): {mounted.stderr.strip()}")
    yield checkpoints
    subprocess.run(["umount", "--lazy", str(checkpoints)], check=True)


@pytest.fixture(scope="module")
def starts(small_disk) -> dict:
    """The uninterrupted run; then the same command started until it ends, one fault a start."""
    runs = small_disk.parent.parent
    whole = run(command(runs, "whole"))
    assert whole.returncode == 0, whole.stdout[-3000:]
    same = [*command(runs, "chaos"), *chaos(runs / "faults", **FAULTS)]
    (runs / "faults").mkdir()
    started = {}
    for name in ("killed", "terminated", "disk_full"):
        started[name] = run(same)
        (runs / f"{name}.out").write_text(started[name].stdout)  # for a failing test's reader
        started[f"{name}_at"] = read_checkpoint(small_disk / "last.ckpt", mmap=True)["global_step"]
    (small_disk / FILLER).unlink()  # space again
    started["final"] = run(same)
    assert started["final"].returncode == 0, started["final"].stdout[-3000:]
    return {"runs": runs, **started}


FAULTS = {"kill_at": KILL_AT, "term_at": TERM_AT, "fill_at": FILL_AT, "room": ROOM}


@pytest.mark.slow
def test_each_fault_stops_the_run_where_it_should(starts):
    killed, terminated = starts["killed"], starts["terminated"]
    log = (starts["runs"] / "chaos" / "train.log").read_text()
    assert killed.returncode != 0 and "DDP rank 1 (pid" in log and "was lost" in log
    assert starts["killed_at"] == KILL_AT - 1

    assert terminated.returncode == exit_status(signal.SIGTERM), terminated.stdout[-3000:]
    assert f"SIGTERM: every rank stops after update {TERM_AT + 1}" in log
    assert starts["terminated_at"] == TERM_AT + 1
    assert "Traceback" not in terminated.stdout


@pytest.mark.slow
def test_a_full_disk_stops_every_rank_with_one_message_keeping_last_ckpt(starts, small_disk):
    full = starts["disk_full"]
    assert full.returncode == 1
    assert "Traceback" not in full.stdout, full.stdout[-3000:]
    (message,) = (line for line in full.stdout.splitlines() if line.startswith("DiskFullError"))
    assert message.startswith(f"DiskFullError: [Errno {errno.ENOSPC}] {small_disk}/last.ckpt")
    assert f"are free in {small_disk}" in message
    # The previous last.ckpt, whole; no temporary file left; the restart resumed from it.
    assert starts["disk_full_at"] == FILL_AT
    assert not list(small_disk.glob(".*.tmp"))
    log = (starts["runs"] / "chaos" / "train.log").read_text()
    assert log.count(f"Resuming from {small_disk / 'last.ckpt'}") == 3


@pytest.mark.slow
def test_the_restarted_run_ends_as_the_uninterrupted_one_bit_for_bit(starts, small_disk):
    runs = starts["runs"]
    whole = torch.load(runs / "whole" / "checkpoints" / "last.ckpt", weights_only=True)
    restarted = torch.load(small_disk / "last.ckpt", weights_only=True)
    assert whole["global_step"] == MAX_STEPS
    assert_bit_identical(whole, restarted)


@pytest.mark.slow
def test_one_w_and_b_run_holds_one_continuous_loss_curve_equal_to_the_uninterrupted(starts):
    """Each start logs on from the last step the starts before it logged (a resume from an older
    last.ckpt, after the kill and the full disk, trains steps again but logs them once)."""
    runs = starts["runs"]
    _, (expected,) = wandb_records.losses_by_start(runs / "whole")
    ids, curves = wandb_records.losses_by_start(runs / "chaos")
    assert len(ids) == 1 and len(curves) == 4
    assert all(curves)  # every start logged
    assert [step for curve in curves for step in curve] == list(range(MAX_STEPS))
    for curve in curves:
        assert curve == {step: expected[step] for step in curve}  # bit for bit
