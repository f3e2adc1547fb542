"""The run plan global rank 0 decides, handed to the other ranks before any process group exists.

Each rank deciding alone can disagree: a rank whose view of a shared file system is stale
misses `last.ckpt` and would start from step 0 beside ranks that resume. So rank 0 decides and
the others take its plan, by the one channel each launcher leaves before the Trainer exists:

- Lightning's own launcher (`trainer=ddp` on one machine) starts the other ranks from rank 0's
  process after the plan is made: they inherit it in the environment (`PLAN_ENV`), tagged with
  rank 0's pid so that a plan left in a shell's environment is never taken.
- srun and torchrun start every rank at once: rank 0 writes the plan (or the refusal of the
  config) into the run folder, under a name unique to this launch (`launch_key`), and the
  others wait for it. A file that is new shows up on every host, where a stale negative view
  of `last.ckpt` may not; every rank must therefore share the run folder (`hydra.run.dir`).

Ranks started some other way, without a launch to name, decide alone and say so.
"""

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from transformer_nmt.atomic import write_atomically
from transformer_nmt.training.config_checks import ConfigError
from transformer_nmt.training.run_lock import is_global_rank_zero
from transformer_nmt.training.run_plan import RunPlan

log = logging.getLogger(__name__)

# Rank 0's plan, inherited by the ranks Lightning's launcher starts from its process.
PLAN_ENV = "TRANSFORMER_NMT_RUN_PLAN"
# The run folder's subfolder of the plans srun and torchrun launches hand over.
FOLDER = ".plans"
POLL_SECONDS = 0.2


def agreed_plan(
    decide: Callable[[], RunPlan],
    run_dir: str | os.PathLike,
    timeout: float,
    environ: Mapping[str, str] = os.environ,
) -> RunPlan:
    """Rank 0's plan on every rank: decided here on rank 0, received on the others.

    Args:
        decide: makes the plan (`run_plan.plan_run`); may raise `ConfigError`, which the other
            ranks of an srun or torchrun launch then raise too.
        run_dir: the run folder, shared by the ranks.
        timeout: seconds a rank waits for rank 0's plan file before giving up.
    """
    key = launch_key(environ)
    if is_global_rank_zero(environ):
        return _decide_and_hand_over(decide, run_dir, key)
    inherited = environ.get(PLAN_ENV)
    handed = json.loads(inherited) if inherited else {}
    if handed.get("pid") == os.getppid():
        plan = RunPlan.from_dict(handed["plan"])
    elif key is not None:
        plan = _wait_for(plan_file(run_dir, key), timeout, _no_plan_hint)
        plan = _received(json.loads(plan.read_text()))
    else:
        log.warning(
            "This rank decides its run plan alone: no launcher it knows started it "
            "(Lightning's, srun or torchrun), so it cannot take global rank 0's"
        )
        return decide()
    if plan.resume_from is not None:  # rank 0 saw it; this host's view may lag behind
        _wait_for(Path(plan.resume_from), timeout, _unseen_checkpoint_hint)
    return plan


def _decide_and_hand_over(
    decide: Callable[[], RunPlan], run_dir: str | os.PathLike, key: str | None
) -> RunPlan:
    try:
        plan = decide()
    except ConfigError as error:
        if key is not None:
            write_atomically(plan_file(run_dir, key), json.dumps({"refused": str(error)}))
        raise
    if key is not None:
        write_atomically(plan_file(run_dir, key), json.dumps({"plan": plan.to_dict()}))
    os.environ[PLAN_ENV] = json.dumps({"pid": os.getpid(), "plan": plan.to_dict()})
    return plan


def _received(handed: dict) -> RunPlan:
    if "refused" in handed:
        raise ConfigError(handed["refused"])
    return RunPlan.from_dict(handed["plan"])


def _wait_for(path: Path, timeout: float, hint: Callable[[Path, float], str]) -> Path:
    """`path`, once this host sees it; TimeoutError with `hint` if it does not in time."""
    deadline = time.monotonic() + timeout
    while not path.is_file():
        if time.monotonic() > deadline:
            raise TimeoutError(hint(path, timeout))
        time.sleep(POLL_SECONDS)
    return path


def _no_plan_hint(path: Path, timeout: float) -> str:
    return (
        f"global rank 0 wrote no run plan to {path} within {timeout:.0f} s: give every rank the "
        "same run folder (hydra.run.dir), and see rank 0's log for why it stopped"
    )


def _unseen_checkpoint_hint(path: Path, timeout: float) -> str:
    return (
        f"global rank 0 resumes from {path}, which this host has not seen within {timeout:.0f} "
        "s: every rank must see the run folder on a shared file system"
    )


def launch_key(environ: Mapping[str, str] = os.environ) -> str | None:
    """A name for this start of the job's ranks, the same on each; None outside an srun or
    torchrun launch of several ranks.

    A requeued SLURM job and a torchrun restart count their restarts, so each start gets its own
    plan; torchrun's rendezvous address tells apart launches that reuse a run id.
    """
    if int(environ.get("WORLD_SIZE", environ.get("SLURM_NTASKS", 1))) < 2:
        return None  # one process: no rank to hand a plan to
    parts = []
    if "TORCHELASTIC_RUN_ID" in environ:
        address = f"{environ.get('MASTER_ADDR', '')}:{environ.get('MASTER_PORT', '')}"
        restart = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        parts.append(f"torchrun-{environ['TORCHELASTIC_RUN_ID']}-{address}-{restart}")
    if "SLURM_JOB_ID" in environ and "SLURM_STEP_ID" in environ:
        restart = environ.get("SLURM_RESTART_COUNT", "0")
        parts.append(f"slurm-{environ['SLURM_JOB_ID']}.{environ['SLURM_STEP_ID']}-{restart}")
    return "_".join(parts).replace("/", "-") or None


def plan_file(run_dir: str | os.PathLike, key: str) -> Path:
    return Path(run_dir) / FOLDER / f"{key}.json"
