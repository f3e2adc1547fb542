"""Killed, terminated and diverging runs: nothing written is lost, and resuming is exact."""

import csv
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from helpers.checkpoint_files import assert_bit_identical
from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT, compose_train
from helpers.quick_toy_run import quick_toy_run
from helpers.signal_at_step import signal_at, signal_ranks_apart
from helpers.stop_inside_update import stop_inside_update
from helpers.sweep_runs import wait_for
from transformer_nmt.checkpoint import load_checkpoint, save_atomically
from transformer_nmt.train import train
from transformer_nmt.training.run.checkpoint_io import AtomicCheckpointIO
from transformer_nmt.training.run.stop import exit_status
from transformer_nmt.training.run.sweeps import optimized_metric
from transformer_nmt.training.step.module import TranslationModule

DIES_MID_SAVE = """
import io, os, signal, sys, torch
from transformer_nmt.checkpoint import save_atomically

path = sys.argv[1]
save_atomically({"step": 1, "w": torch.zeros(100_000)}, path)
real_save = torch.save

def half_then_killed(obj, f):
    buffer = io.BytesIO()
    real_save(obj, buffer)
    f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)

torch.save = half_then_killed
save_atomically({"step": 2, "w": torch.ones(100_000)}, path)
"""


def test_a_kill_during_a_save_leaves_the_previous_checkpoint_whole(tmp_path):
    path = tmp_path / "last.ckpt"
    run = subprocess.run([sys.executable, "-c", DIES_MID_SAVE, str(path)], timeout=120)
    assert run.returncode == -signal.SIGKILL
    (partial,) = tmp_path.glob(".last.ckpt.*.tmp")  # the kill did land mid-write
    assert 0 < partial.stat().st_size < path.stat().st_size
    assert torch.load(path, weights_only=True)["step"] == 1
    save_atomically({"step": 3}, path)
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]  # the stale part is gone


def test_the_trainer_writes_checkpoints_atomically(tmp_path):
    trainer = instantiate(compose_train(tmp_path, ["experiment=toy"]).trainer, precision="32")
    assert isinstance(trainer.strategy.checkpoint_io, AtomicCheckpointIO)


# Small enough that a run takes seconds: epochs of ~13 batches, validation on one batch.
QUICK = [
    *quick_toy_run(max_steps=18),
    "callbacks.checkpoints.every_n_steps=3",
]


def start(tmp_path: Path, name: str, *overrides: str) -> subprocess.Popen:
    """`python train.py` writing to tmp_path/name, sharing one tokenizer cache."""
    # tests/ on the path: the runs load `helpers.signal_at_step` from there.
    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")]))
    return subprocess.Popen(
        [
            sys.executable,
            "train.py",
            *QUICK,
            f"paths.log_dir={tmp_path}",
            f"paths.cache_dir={tmp_path}/cache",
            f"hydra.run.dir={tmp_path}/{name}",
            *overrides,
        ],
        cwd=ROOT,
        # One thread: identical arithmetic in every run, and less fighting over the CPU.
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def last_step(run_dir: Path) -> int:
    """The step of run_dir's last.ckpt; -1 while there is none."""
    path = run_dir / "checkpoints" / "last.ckpt"
    if not path.exists():
        return -1
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)["global_step"]


def logged_steps(run_dir: Path) -> dict[int, dict[str, float]]:
    """train/loss and train/lr by step from the CSV logger."""
    (metrics,) = run_dir.glob("csv/version_*/metrics.csv")
    rows = {}
    for row in csv.DictReader(metrics.open()):
        if row["train/loss"]:
            step = int(row["step"])
            rows[step] = {"loss": float(row["train/loss"]), "lr": float(row["train/lr"])}
    return rows


def assert_same_end(reference: Path, run: Path) -> tuple[dict, dict]:
    """Both run folders' last.ckpt: each at step 18, with the same weights."""
    ends = tuple(
        torch.load(r / "checkpoints" / "last.ckpt", weights_only=True) for r in (reference, run)
    )
    assert ends[0]["global_step"] == ends[1]["global_step"] == 18
    for key, weights in ends[0]["state_dict"].items():
        torch.testing.assert_close(ends[1]["state_dict"][key], weights, rtol=1e-4, atol=1e-5)
    return ends


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory) -> dict:
    """One uninterrupted run; one of the same seed SIGKILLed, resumed, SIGTERMed and resumed.

    Each run stops itself at a fixed step, so the test does not depend on timing. 13 batches an
    epoch and validation at each epoch's end: killed at step 5 (last checkpoint: step 3),
    terminated at step 9, and the final run validates at step 13, after both.
    """
    tmp_path = tmp_path_factory.mktemp("runs")
    assert start(tmp_path, "uninterrupted").wait(timeout=600) == 0

    killed = start(tmp_path, "killed", *signal_at(5, signal.SIGKILL))
    killed.wait(timeout=600)
    killed_at = last_step(tmp_path / "killed")

    resumed = start(
        tmp_path,
        "resumed",
        f"ckpt_path={tmp_path}/killed/checkpoints/last.ckpt",
        *signal_at(9, signal.SIGTERM),
    )
    _, terminated_stderr = resumed.communicate(timeout=600)
    terminated_at = last_step(tmp_path / "resumed")

    final = start(tmp_path, "final", f"ckpt_path={tmp_path}/resumed/checkpoints/last.ckpt")
    _, final_stderr = final.communicate(timeout=600)
    assert final.returncode == 0, final_stderr[-3000:]
    return {
        "dir": tmp_path,
        "killed": killed,
        "killed_at": killed_at,
        "terminated": resumed,
        "terminated_at": terminated_at,
        "terminated_stderr": terminated_stderr,
    }


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_exits_without_a_traceback(interrupted):
    assert interrupted["terminated"].returncode == exit_status(signal.SIGTERM)
    assert "Traceback" not in interrupted["terminated_stderr"]
    run = interrupted["dir"] / "resumed"
    checkpoint = run / "checkpoints" / "last.ckpt"
    assert (
        f"SIGTERM at step {interrupted['terminated_at']}: saved {checkpoint}; "
        f"resume with ckpt_path={checkpoint}"
    ) in (run / "train.log").read_text()
    assert interrupted["killed_at"] == 3  # the checkpoint before the kill at step 5
    assert interrupted["terminated_at"] > interrupted["killed_at"]


@pytest.mark.slow
def test_resuming_after_sigkill_and_sigterm_matches_the_uninterrupted_run(interrupted):
    runs = interrupted["dir"]
    assert interrupted["killed"].returncode == -signal.SIGKILL
    killed = torch.load(runs / "killed" / "checkpoints" / "last.ckpt", weights_only=True)
    progress = killed["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]
    assert 0 < progress["processed"] < 13, "the kill should land mid-epoch"

    # Every step the resumed runs logged: the same batch (loss) at the same learning rate.
    expected = logged_steps(runs / "uninterrupted")
    seen = {**logged_steps(runs / "resumed"), **logged_steps(runs / "final")}
    assert min(seen) == interrupted["killed_at"] and max(seen) == max(expected) == 17
    for step, values in seen.items():
        assert values["lr"] == pytest.approx(expected[step]["lr"], rel=1e-6), step
        assert values["loss"] == pytest.approx(expected[step]["loss"], rel=1e-4), step

    # Same step count, optimizer state and weights at the end.
    ends = assert_same_end(runs / "uninterrupted", runs / "final")
    adam = [end["optimizer_states"][0]["state"] for end in ends]
    for index, state in adam[0].items():
        assert adam[1][index]["step"] == state["step"]
        torch.testing.assert_close(adam[1][index]["exp_avg_sq"], state["exp_avg_sq"])


@pytest.mark.slow
def test_the_same_command_after_sigterm_resumes_in_its_folder_and_ends_as_the_uninterrupted_run(
    interrupted,
):
    """No ckpt_path: the restart finds the run folder's last.ckpt (as a requeued job does)."""
    runs = interrupted["dir"]
    command = signal_at(9, signal.SIGTERM, once=f"{runs}/terminated_once")
    for expected_exit in (exit_status(signal.SIGTERM), 0):
        run = start(runs, "restarted", *command)
        _, stderr = run.communicate(timeout=600)
        assert run.returncode == expected_exit, stderr[-3000:]
        if expected_exit:  # the batch under way when SIGTERM came is finished first
            assert 9 <= last_step(runs / "restarted") < 18
    log = (runs / "restarted" / "train.log").read_text()
    assert f"Resuming from {runs}/restarted/checkpoints/last.ckpt" in log
    assert_same_end(runs / "uninterrupted", runs / "restarted")


SIGNALLED_AT = 3  # the update during which two ranks are signalled apart


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_two_ranks_signalled_at_different_points_stop_after_the_same_update(tmp_path, signum):
    """Rank 1 between steps, rank 0 inside the step's all_reduce: a handler that ran a
    collective (Lightning's broadcast) would pair it with another rank's and hang. USR1 takes the
    same path, on a real SLURM job (tests/test_slurm.py), which it also requeues."""
    run = tmp_path / "run"
    command = [
        sys.executable, "train.py", *quick_toy_run(12), "logger=none", "trainer=ddp_cpu",
        f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache", f"hydra.run.dir={run}",
        *signal_ranks_apart(SIGNALLED_AT, signum, tmp_path),
    ]  # fmt: skip
    # A hang fails the test here, instead of holding CI.
    done = subprocess.run(
        command, cwd=ROOT, env=ddp_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == exit_status(signum), done.stderr[-3000:]  # rank 0's status
    stopped = [Path(p).read_text() for p in wait_for(tmp_path / "rank*.stopped_at", count=2)]
    assert stopped == [str(SIGNALLED_AT + 1)] * 2  # the update rank 1's vote was counted in
    checkpoints = run / "checkpoints"
    assert [p.name for p in checkpoints.iterdir()] == ["last.ckpt"]
    assert last_step(run) == SIGNALLED_AT + 1
    name = signal.Signals(signum).name
    log = (run / "train.log").read_text()
    assert f"{name}: every rank stops after update {SIGNALLED_AT + 1}" in log
    assert f"{name} at step {SIGNALLED_AT + 1}: saved {checkpoints / 'last.ckpt'}" in log
    assert "Traceback" not in done.stderr and "Training failed" not in log


def test_last_checkpoint_holds_the_final_step_when_the_last_validation_is_not_the_best(tmp_path):
    # 15 toy steps an epoch: stopping at step 40 is mid-epoch. Monitoring val/loss for its
    # maximum keeps the first validation the best, so the best checkpoint is saved only at step
    # 15, and the periodic one last at step 36.
    stop_mid_epoch = [
        "experiment=toy",
        "logger=none",
        "trainer.max_steps=40",
        "callbacks.checkpoints.monitor=val/loss",
        "callbacks.checkpoints.mode=max",
        "~callbacks.attention_maps",
        "callbacks.checkpoints.every_n_steps=12",
    ]
    train(compose_train(tmp_path / "first", stop_mid_epoch))
    checkpoints = tmp_path / "first" / "run" / "checkpoints"
    (best,) = checkpoints.glob("step*-loss*.ckpt")
    assert torch.load(best, weights_only=True)["global_step"] == 15
    assert last_step(tmp_path / "first" / "run") == 40

    # It resumes like any other checkpoint.
    resumed = [*stop_mid_epoch, "trainer.max_steps=50", f"ckpt_path={checkpoints}/last.ckpt"]
    train(compose_train(tmp_path / "resumed", resumed))
    assert last_step(tmp_path / "resumed" / "run") == 50


def test_a_finished_run_extended_from_its_last_checkpoint_trains_as_the_longer_run(tmp_path):
    # 13 batches an epoch: the first run ends at step 10, mid-epoch. Extended to 18 steps it
    # must train the rest of epoch 0, then epoch 1 from its start, as a run of 18 steps does.
    quick = [q for q in QUICK if not q.startswith(("trainer.max_steps", "logger"))]
    quick.append("logger=none")
    train(compose_train(tmp_path / "longer", [*quick, "trainer.max_steps=18"]))
    train(compose_train(tmp_path / "first", [*quick, "trainer.max_steps=10"]))
    last = tmp_path / "first" / "run" / "checkpoints" / "last.ckpt"
    extended = [*quick, "trainer.max_steps=18", f"ckpt_path={last}"]
    train(compose_train(tmp_path / "extended", extended))

    ends = assert_same_end(tmp_path / "longer" / "run", tmp_path / "extended" / "run")
    assert (
        ends[0]["loops"]["fit_loop"]["epoch_progress"]
        == ends[1]["loops"]["fit_loop"]["epoch_progress"]
    )


def test_a_resumed_run_that_ends_before_validating_reports_its_checkpoints_best(tmp_path):
    # 13 batches an epoch, validation at its end. The first run validates at step 13 and stops
    # at 15; the resumed one, in another folder, stops at 18, before its next validation.
    quick = [q for q in QUICK if not q.startswith(("trainer.max_steps", "logger"))]
    quick.append("logger=none")
    first = train(compose_train(tmp_path / "first", [*quick, "trainer.max_steps=15"]))
    last = tmp_path / "first" / "run" / "checkpoints" / "last.ckpt"

    cfg = compose_train(tmp_path / "resumed", [*quick, "trainer.max_steps=18", f"ckpt_path={last}"])
    resumed = train(cfg)
    assert last_step(tmp_path / "resumed" / "run") == 18
    assert "val/bleu" not in resumed  # no validation since the resume
    assert resumed["best/val/bleu"] == first["best/val/bleu"] == first["val/bleu"]
    assert optimized_metric(cfg, resumed) == first["val/bleu"]


# Eight steps of small batches, a checkpoint every two, no validation.
EIGHT_STEPS = [
    "experiment=toy",
    "logger=none",
    "data.corpus.num_train=300",
    "data.max_tokens=192",
    "trainer.max_epochs=-1",
    "trainer.max_steps=8",
    "+trainer.num_sanity_val_steps=0",
    "callbacks.checkpoints.every_n_steps=2",
]


def test_ctrl_c_twice_stops_at_once_with_130_keeping_the_checkpoints_written(tmp_path, caplog):
    again = [  # a second SignalAtStep: Ctrl-C twice as step 5 starts
        "+callbacks.again._target_=helpers.signal_at_step.SignalAtStep",
        "+callbacks.again.step=5",
        f"+callbacks.again.signum={int(signal.SIGINT)}",
    ]
    with pytest.raises(SystemExit) as stopped:
        train(compose_train(tmp_path, [*EIGHT_STEPS, *signal_at(5, signal.SIGINT), *again]))
    assert stopped.value.code == exit_status(signal.SIGINT)
    assert "Ctrl-C twice: stopped at once" in caplog.text
    assert "Training failed" not in caplog.text
    assert last_step(tmp_path / "run") == 4  # the periodic save before; step 5 never ran


@pytest.fixture
def nan_at(monkeypatch):
    """Make the training loss NaN at the given steps."""
    steps: set[int] = set()
    original = TranslationModule.training_step

    def poisoned(self, batch, batch_idx):
        loss = original(self, batch, batch_idx)
        return loss * math.nan if self.global_step in steps else loss

    monkeypatch.setattr(TranslationModule, "training_step", poisoned)
    return steps


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, nan_at):
    nan_at.add(5)
    with pytest.raises(FloatingPointError, match="training diverged: train/loss=nan at step 5"):
        train(compose_train(tmp_path, EIGHT_STEPS))
    checkpoints = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "last.ckpt",
        "step2.ckpt",
        "step4.ckpt",
    ]
    assert last_step(tmp_path / "run") == 4
    model, _ = load_checkpoint(checkpoints / "last.ckpt")
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_nan_losses_can_be_skipped_and_counted(tmp_path, nan_at):
    nan_at.update({3, 5})
    metrics = train(compose_train(tmp_path, [*EIGHT_STEPS, "callbacks.finite_loss.skip=true"]))
    assert metrics["train/skipped_steps"] == 2
    assert last_step(tmp_path / "run") == 8
    model, _ = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.slow
def test_a_run_with_dropout_resumed_mid_epoch_and_at_its_end_is_bit_identical_to_the_whole_run(
    tmp_path,
):
    # 13 shuffled, length-bucketed batches an epoch, validated at its end: resumed at step 10,
    # mid-epoch, and at step 13, after the validation; the rest draws dropout masks from the
    # restored generators.
    quick = [q for q in QUICK if not q.startswith(("trainer.max_steps", "logger"))]
    quick += ["logger=none", "model.dropout=0.1"]
    train(compose_train(tmp_path / "whole", [*quick, "trainer.max_steps=18"]))
    last = None
    for name, steps in (("to10", 10), ("to13", 13), ("to18", 18)):
        resume = [f"ckpt_path={last}"] if last else []
        train(compose_train(tmp_path / name, [*quick, f"trainer.max_steps={steps}", *resume]))
        last = tmp_path / name / "run" / "checkpoints" / "last.ckpt"
    ends = [
        torch.load(tmp_path / r / "run" / "checkpoints" / "last.ckpt", weights_only=True)
        for r in ("whole", "to18")
    ]
    assert_bit_identical(*ends)


@pytest.mark.slow
def test_two_ranks_with_dropout_stopped_and_restarted_end_bit_identical_to_the_uninterrupted_run(
    tmp_path,
):
    """Rank 1 alone is signalled; each rank draws its own masks for its own batches, and each
    must get its own generators back."""

    def run(name: str, *overrides: str) -> subprocess.CompletedProcess:
        command = [
            sys.executable, "train.py", *quick_toy_run(8), "logger=none", "trainer=ddp_cpu",
            "model.dropout=0.1", f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache",
            f"hydra.run.dir={tmp_path}/{name}", *overrides,
        ]  # fmt: skip
        return subprocess.run(
            command, cwd=ROOT, env=ddp_env(), capture_output=True, text=True, timeout=300
        )

    done = run("whole")
    assert done.returncode == 0, done.stderr[-3000:]
    stop = signal_at(5, signal.SIGTERM, once=f"{tmp_path}/signalled", rank=1)
    for expected_exit in (exit_status(signal.SIGTERM), 0):
        done = run("restarted", *stop)
        assert done.returncode == expected_exit, done.stderr[-3000:]
    assert "Resuming from" in (tmp_path / "restarted" / "train.log").read_text()
    ends = [
        torch.load(tmp_path / r / "checkpoints" / "last.ckpt", weights_only=True)
        for r in ("whole", "restarted")
    ]
    assert ends[0]["global_step"] == 8
    assert_bit_identical(*ends)


@pytest.mark.slow
def test_a_validation_inside_an_accumulation_writes_last_ckpt_at_the_update_end(tmp_path):
    """13 batches an epoch in updates of 2, validated every quarter epoch: after batches 3, 6, 9
    and 12, the first inside update 2. Killed as update 3 starts, the run resumes from the end of
    update 2, not from inside it, which would skip batch 4's gradients."""
    every_quarter = [
        "trainer.accumulate_grad_batches=2", "trainer.val_check_interval=0.25",
        "trainer.max_steps=9", "model.dropout=0.1",
    ]  # fmt: skip
    assert start(tmp_path, "whole", *every_quarter).wait(timeout=600) == 0
    kill = signal_at(2, signal.SIGKILL, once=f"{tmp_path}/killed_once")
    assert start(tmp_path, "killed", *every_quarter, *kill).wait(timeout=600) == -signal.SIGKILL
    assert last_step(tmp_path / "killed") == 2
    resumed = start(tmp_path, "killed", *every_quarter, *kill)
    _, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr[-3000:]
    ends = [
        torch.load(tmp_path / r / "checkpoints" / "last.ckpt", weights_only=True)
        for r in ("whole", "killed")
    ]
    assert ends[0]["global_step"] == 9
    assert_bit_identical(*ends)


@pytest.mark.slow
def test_training_that_ends_inside_an_accumulation_resumes_at_the_update_start(tmp_path):
    """Ended after batch 5, the first of update 3 (as `trainer.max_time` can end it), the run's
    last.ckpt holds the end of update 2, the loops' progress and the generators with it: the
    resumed run trains batch 5 again, with the same dropout masks."""
    quick = [q for q in QUICK if not q.startswith(("trainer.max_steps", "logger"))]
    quick += [
        "logger=none", "model.dropout=0.1", "trainer.accumulate_grad_batches=2",
        "trainer.max_steps=6",
    ]  # fmt: skip
    train(compose_train(tmp_path / "whole", quick))
    train(compose_train(tmp_path / "cut", [*quick, *stop_inside_update(5)]))
    last = tmp_path / "cut" / "run" / "checkpoints" / "last.ckpt"
    cut = torch.load(last, weights_only=True)
    assert cut["global_step"] == 2
    assert cut["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["processed"] == 4
    train(compose_train(tmp_path / "resumed", [*quick, f"ckpt_path={last}"]))
    ends = [
        torch.load(tmp_path / r / "run" / "checkpoints" / "last.ckpt", weights_only=True)
        for r in ("whole", "resumed")
    ]
    assert_bit_identical(*ends)
