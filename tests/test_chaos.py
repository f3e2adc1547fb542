"""One run of 2 Gloo ranks with dropout and W&B offline, interrupted in turn by a killed rank,
SIGTERMs to both ranks at different points of a step, a disk that fills during a checkpoint
write and SLURM's time-limit USR1, restarted each time by the same command (the last time by the
job's requeue): it ends as the uninterrupted run, bit for bit, with one continuous loss curve in
one W&B run. Where SLURM is not installed, the last start runs the command without it.

`scontrol requeue` (tests/test_slurm.py) and storage outages under a 2-worker sweep
(tests/training/test_sweep_faults.py) have their own tests; experiments/chaos/ records all.
"""

import errno
import os
import shlex
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
from helpers.pause_until_signal import pause_until_signal
from helpers.quick_toy_run import quick_toy_run
from helpers.slurm_cluster import SlurmCluster, missing_binaries
from transformer_nmt.checkpoint import read_checkpoint
from transformer_nmt.training.run.stop import exit_status

MAX_STEPS = 12
# 2 ranks: 7 updates an epoch, validated at its end. A checkpoint every 2 updates. Rank 1 is
# killed as update 4 starts (step 3; last.ckpt: step 2); the SIGTERMs come in update 6, and the
# run stops after it, saving last.ckpt; the disk fills as update 9 starts, after update 8's save,
# so that update 10's last.ckpt does not fit. Under SLURM, the start after it holds rank 0 as
# update 11 starts until USR1 comes (the disk-full start never gets there), and the run stops
# after that update, saves last.ckpt and requeues its job, which trains update 12.
KILL_AT, TERM_AT, FILL_AT, USR1_AT = 3, 5, 8, 10
# Bytes left free: the periodic checkpoint (weights only) fits, last.ckpt (Adam's moments too,
# 3 times the weights) does not.
ROOM = 1_500_000
TMPFS_SIZE = "16m"  # every checkpoint of the run, and the filler beside them
SLURM_MISSING = missing_binaries()
# 2 tasks on the test cluster's one node, requeued (by the run itself) rather than ended.
SBATCH = ["--nodes=1", "--ntasks-per-node=2", "--cpus-per-task=1", "--requeue"]


def command(tmp_path: Path, name: str) -> list[str]:
    return [
        sys.executable, "train.py", *quick_toy_run(MAX_STEPS), "logger=wandb", "trainer=ddp_cpu",
        "model.dropout=0.1", "callbacks.checkpoints.every_n_steps=2",
        f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache",
        f"hydra.run.dir={tmp_path}/{name}",
    ]  # fmt: skip


TIMEOUT = 600
ENV = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def run(args: list[str]) -> subprocess.CompletedProcess:
    """One start of both ranks (Lightning's launcher), its output; a hang fails it."""
    done = subprocess.run(
        args, cwd=ROOT, env={**ddp_env(), **ENV}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    return done


def run_as_slurm_job(cluster: SlurmCluster, args: list[str], runs: Path) -> dict:
    """`args` as the 2 tasks of a SLURM job, sent USR1 (as `--signal=USR1@N` sends it near the
    time limit) once rank 0 holds at USR1_AT; the job's record once its requeue has ended."""
    script = runs / "chaos.sbatch"
    options = "".join(f"#SBATCH {option}\n" for option in SBATCH)
    script.write_text(f"#!/bin/bash\n{options}srun {shlex.join(args)}\n")
    env = {**ddp_env(), **ENV}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    output = runs / "slurm.out"
    job = cluster.sbatch(script, f"--output={output}", "--open-mode=append", cwd=ROOT, env=env)
    cluster.wait_until_held(job, runs / "faults" / f"paused_at_{USR1_AT}", output, TIMEOUT)
    cluster.run("scancel", "--signal=USR1", str(job))  # to the tasks, as --signal=USR1@N does
    return {"id": job, "output": output, **cluster.wait_until_ended(job, TIMEOUT)}


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
def starts(small_disk, request) -> dict:
    """The uninterrupted run; then the same command started until it ends, one fault a start,
    the last under SLURM where it is installed."""
    runs = small_disk.parent.parent
    whole = run(command(runs, "whole"))
    assert whole.returncode == 0, whole.stdout[-3000:]
    cluster = None if SLURM_MISSING else request.getfixturevalue("cluster")
    usr1 = [] if cluster is None else pause_until_signal("usr1", USR1_AT, runs / "faults")
    same = [*command(runs, "chaos"), *chaos(runs / "faults", **FAULTS), *usr1]
    (runs / "faults").mkdir()
    started = {}
    for name in ("killed", "terminated", "disk_full"):
        started[name] = run(same)
        (runs / f"{name}.out").write_text(started[name].stdout)  # for a failing test's reader
        started[f"{name}_at"] = read_checkpoint(small_disk / "last.ckpt", mmap=True)["global_step"]
    (small_disk / FILLER).unlink()  # space again
    if cluster is None:
        started["final"] = run(same)
        assert started["final"].returncode == 0, started["final"].stdout[-3000:]
    else:
        started["slurm"] = job = run_as_slurm_job(cluster, same, runs)
        assert job["JobState"] == "COMPLETED", job["output"].read_text()[-3000:]
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
    assert log.count(f"Resuming from {small_disk / 'last.ckpt'}") == 3 + ("slurm" in starts)


@pytest.mark.slow
@pytest.mark.skipif(
    bool(SLURM_MISSING),
    reason=f"SLURM is not installed (no {', '.join(SLURM_MISSING)}): the last start ran without "
    "it; apt-get install slurmctld slurmd slurm-client munge, as .ci/run does",
)
def test_slurm_usr1_stops_the_run_whose_requeued_job_resumes_it_to_the_end(starts, small_disk):
    job = starts["slurm"]
    log = (starts["runs"] / "chaos" / "train.log").read_text()
    # Rank 0 held between steps, rank 1 inside the step's collectives: one stop, after the update.
    stopped = log.index(f"SIGUSR1 at step {USR1_AT + 1}: saved {small_disk / 'last.ckpt'}")
    assert f"SIGUSR1: every rank stops after update {USR1_AT + 1}" in log
    requeued = log.index(f"SIGUSR1: saved last.ckpt and requeued SLURM job {job['id']}", stopped)
    resumed = log.index(f"Resuming from {small_disk / 'last.ckpt'}", requeued)
    assert resumed < log.index(f"SLURM job {job['id']}, restart 1", requeued)  # the requeued start
    assert (job["JobState"], job["Restarts"], job["ExitCode"]) == ("COMPLETED", "1", "0:0")


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
    assert len(ids) == 1 and len(curves) == 4 + ("slurm" in starts)  # the requeue, a start
    assert all(curves)  # every start logged
    assert [step for curve in curves for step in curve] == list(range(MAX_STEPS))
    for curve in curves:
        assert curve == {step: expected[step] for step in curve}  # bit for bit
