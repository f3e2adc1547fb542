"""Every refusal before the first step reaches every rank: srun's ranks, each started alone, all
end promptly and each names the cause, whichever rank met it."""

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.failing_logger import LOGGER_FAULT
from helpers.failing_probe import PROBE_FAULT
from helpers.failing_setup import SETUP_FAULT
from helpers.hydra_compose import compose_train
from helpers.quick_toy_run import quick_toy_run
from helpers.srun_ranks import run_folder_overrides, run_srun_ranks, srun_env
from helpers.wandb_records import read_records
from transformer_nmt.training.plan.plan_sharing import roll_call
from transformer_nmt.training.plan.refusals import RankRefused
from transformer_nmt.training.run.run_lock import LOCK_NAME

# Well below ddp_timeout_minutes, the wait of a rank left behind; above a loaded start of both.
PROMPT = 150


def refused_everywhere(
    tmp_path, job: str, cause: str, *overrides: str, told: str = "", failing: int | None = None
) -> None:
    """Both ranks exit non-zero within PROMPT seconds, each one's output naming `cause`, and each
    but the `failing` one's also `told` (who failed)."""
    ranks = run_srun_ranks(
        [*quick_toy_run(2), "logger=none", *run_folder_overrides(tmp_path), *overrides],
        job,
        PROMPT,
    )
    for rank, done in enumerate(ranks):
        assert done.returncode is not None, f"rank {rank} still waiting:\n{done.stdout[-3000:]}"
        assert done.returncode != 0, done.stdout[-3000:]
        assert cause in done.stdout, f"rank {rank}:\n{done.stdout[-3000:]}"
        if rank != failing:
            assert told in done.stdout, f"rank {rank}:\n{done.stdout[-3000:]}"


@pytest.mark.slow
def test_an_unreadable_last_ckpt_seen_by_rank_0_ends_both_ranks_naming_it(tmp_path):
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    last.write_bytes(b"not a checkpoint")
    refused_everywhere(tmp_path, "11", str(last))


@pytest.mark.slow
def test_a_held_run_lock_ends_both_ranks_naming_its_holder(tmp_path):
    holds = "import sys; from transformer_nmt.training.run.run_lock import RunLock\n"
    holds += "with RunLock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.readline()"
    holder = subprocess.Popen(
        [sys.executable, "-c", holds, str(tmp_path / "run")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "held\n"
        refused_everywhere(tmp_path, "12", f"is in use by another run: process {holder.pid}")
    finally:
        holder.communicate("\n", timeout=60)
    assert not (tmp_path / "run" / LOCK_NAME).exists()


@pytest.mark.slow
def test_a_budget_probe_failing_on_rank_1_ends_both_ranks_naming_it(tmp_path):
    refused_everywhere(
        tmp_path,
        "13",
        PROBE_FAULT,
        "data.max_tokens=auto",
        "callbacks.auto_max_tokens._target_=helpers.failing_probe.FailsOnRank1",
    )


def failing_logger(tmp_path, rank: int) -> list[str]:
    """A logger whose start fails on global rank `rank`, after the plan is handed over."""
    return [
        "+logger.failing._target_=helpers.failing_logger.fails_on_rank",
        f"+logger.failing.rank={rank}",
        f"+logger.failing.save_dir={tmp_path}/csv",
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("job", "failing", "where"), [("14", 0, "logger"), ("15", 1, "logger"), ("17", 1, "setup")]
)
def test_a_rank_failing_after_the_plan_ends_both_ranks_naming_it(tmp_path, job, failing, where):
    """Rank 0 has handed its plan over and both go on to build (the loggers) and into fit (the
    datamodule's setup): a rank that fails there leaves the other bound for a collective, where it
    would wait for the failed one (NCCL) or fail naming no one (Gloo); the other names the failed
    rank."""
    fault, overrides = (
        (LOGGER_FAULT, failing_logger(tmp_path, failing))
        if where == "logger"
        else (SETUP_FAULT, ["data._target_=helpers.failing_setup.FailsOnRank1"])
    )
    refused_everywhere(
        tmp_path,
        job,
        fault,
        *overrides,
        told=f"global rank {failing} failed before training started",
        failing=failing,
    )


@pytest.mark.slow
def test_rank_0s_w_and_b_run_ends_failed_when_another_rank_fails_to_get_ready(
    tmp_path, monkeypatch
):
    """Rank 0 has begun its W&B run when it hears of rank 1's failure: the run ends there, not
    left open for the next `train` of this process (a sweep's next trial)."""
    import wandb

    from transformer_nmt.train import train

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name, value in srun_env(0, "16", 0).items():
        if name.startswith("SLURM_"):
            monkeypatch.setenv(name, value)
    cfg = compose_train(tmp_path, [*quick_toy_run(2), "logger=wandb"])
    roll_call(cfg.paths.output_dir, 60).report("1", "OSError: rank 1's disk (injected)")
    with pytest.raises(RankRefused, match=r"global rank 1 failed .*OSError: rank 1's disk"):
        train(cfg)
    assert wandb.run is None
    (run_file,) = Path(cfg.paths.output_dir).glob("wandb/offline-run-*/run-*.wandb")
    assert [r.exit.exit_code for r in read_records(run_file) if r.HasField("exit")] == [1]
