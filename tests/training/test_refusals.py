"""Every refusal before the first step reaches every rank: srun's ranks, each started alone, all
end promptly and each names the cause, whichever rank met it."""

import subprocess
import sys

import pytest

from helpers.failing_logger import LOGGER_FAULT
from helpers.failing_probe import PROBE_FAULT
from helpers.quick_toy_run import quick_toy_run
from helpers.srun_ranks import run_folder_overrides, run_srun_ranks
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


@pytest.mark.slow
@pytest.mark.parametrize("failing", [0, 1])
def test_a_logger_failing_on_one_rank_after_the_plan_ends_both_ranks_naming_it(tmp_path, failing):
    """Rank 0 has handed its plan over and both go on to build: a rank that fails there leaves
    the other bound for fit, where it would wait for the failed one in the process group's start;
    the other names the failed rank."""
    refused_everywhere(
        tmp_path,
        f"1{4 + failing}",
        LOGGER_FAULT,
        "+logger.failing._target_=helpers.failing_logger.fails_on_rank",
        f"+logger.failing.rank={failing}",
        f"+logger.failing.save_dir={tmp_path}/csv",
        told=f"global rank {failing} failed before training started",
        failing=failing,
    )
