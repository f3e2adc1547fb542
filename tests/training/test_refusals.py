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


def refused_everywhere(tmp_path, job: str, cause: str, *overrides: str) -> None:
    """Both ranks exit non-zero within PROMPT seconds, each one's output naming `cause`."""
    ranks = run_srun_ranks(
        [*quick_toy_run(2), "logger=none", *run_folder_overrides(tmp_path), *overrides],
        job,
        PROMPT,
    )
    for rank, done in enumerate(ranks):
        assert done.returncode is not None, f"rank {rank} still waiting:\n{done.stdout[-3000:]}"
        assert done.returncode != 0, done.stdout[-3000:]
        assert cause in done.stdout, f"rank {rank}:\n{done.stdout[-3000:]}"


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
def test_a_logger_failing_on_rank_0_after_the_plan_ends_both_ranks_naming_it(tmp_path):
    """Rank 0 has handed its plan over: rank 1 goes on to fit, where it would wait for rank 0."""
    refused_everywhere(
        tmp_path,
        "14",
        LOGGER_FAULT,
        "+logger.failing._target_=helpers.failing_logger.fails_on_rank_0",
        f"+logger.failing.save_dir={tmp_path}/csv",
    )
