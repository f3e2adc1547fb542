"""The run plan global rank 0 decides, handed to the other ranks before any process group exists.

Each rank deciding alone can disagree: a rank whose view of a shared file system is stale
misses `last.ckpt` and would start from step 0 beside ranks that resume. So rank 0 decides and
the others take its plan, by the one channel each launcher leaves before the Trainer exists:

- Lightning's own launcher (`trainer=ddp` on one machine) starts the other ranks from rank 0's
  process after the plan is made: they inherit it in the environment (`PLAN_ENV`), tagged with
  rank 0's pid so that a plan left in a shell's environment is never taken.
- torchrun starts every rank at once, beside its agent's key-value store (the one
  `init_process_group` joins later): rank 0 puts the plan (or its refusal) there
  and the others wait for it; the hosts need share no file system.
- srun starts every rank at once with no such store: rank 0 writes the plan into the run folder,
  under a name unique to this start of the job (`launch_key`), and the others wait for it.
  Whatever stops rank 0 as it decides (a bad config, a locked run folder, an unreadable
  checkpoint) goes the same way in place of the plan, so the others stop too, naming it. A
  file that is new shows up on every host, where a stale negative view of `last.ckpt` may not;
  every rank must share the run folder (`hydra.run.dir`), as resuming needs anyway.

A rank that takes a plan resuming from a checkpoint waits until its own host sees that file.
Ranks started some other way, without a launch to name, decide alone and say so.

What stops any rank after the plan, as it builds the data, the model and the loggers, goes the same
way (`start_handed_over`): every rank reports its outcome there and starts only once every rank
has reported, since the others would otherwise wait for a failed one in the process group's start
until `ddp_timeout_minutes`. What stops a rank inside `fit` before the first step (the datamodule's
`setup`, the checkpoint's restore, the first batch) is told there too (`refusals_handed_over`):
the others, whose next collective fails as the failed rank exits, name it in place of the broken
connection.
"""

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from torch.distributed import DistStoreError, TCPStore

from transformer_nmt.runtime.atomic import write_atomically
from transformer_nmt.runtime.run_names import launcher_rank
from transformer_nmt.training.plan.refusals import RankRefused, cause
from transformer_nmt.training.plan.run_plan import RunPlan
from transformer_nmt.training.run.run_lock import is_global_rank_zero

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
        decide: makes the plan (`run_plan.plan_run`), holding the run folder's lock; what it
            raises, the other ranks of a torchrun or srun launch raise as `RankRefused`.
        run_dir: the run folder, shared by the ranks of an srun launch.
        timeout: seconds a rank waits for rank 0's plan, and for the checkpoint it resumes.
    """
    channel = launch_channel(run_dir, timeout, environ)
    if is_global_rank_zero(environ):
        return _decide_and_hand_over(decide, channel)
    handed = _inherited(environ)
    if handed:
        plan = RunPlan.from_dict(handed["plan"])
    elif channel is not None:
        plan = _received(channel.take())
    else:
        log.warning(
            "This rank decides its run plan alone: no launcher it knows started it "
            "(Lightning's, srun or torchrun), so it cannot take global rank 0's"
        )
        return decide()
    if plan.resume_from is not None:  # rank 0 saw it; this host's view may lag behind
        _wait_for(Path(plan.resume_from), timeout, _unseen_checkpoint_hint)
    return plan


def _decide_and_hand_over(decide: Callable[[], RunPlan], channel: "Channel | None") -> RunPlan:
    try:
        plan = decide()
    except BaseException as error:  # a locked folder, an unreadable checkpoint, Ctrl-C: any
        if channel is not None:
            channel.put({"refused": cause(error)})
        raise
    if channel is not None:
        channel.put({"plan": plan.to_dict()})
    os.environ[PLAN_ENV] = json.dumps({"pid": os.getpid(), "plan": plan.to_dict()})
    return plan


def _inherited(environ: Mapping[str, str]) -> dict:
    """The plan rank 0 left in the environment of the ranks it started itself; {} if none."""
    handed = json.loads(environ.get(PLAN_ENV) or "{}")
    return handed if handed.get("pid") == os.getppid() else {}


def withdraw_plan() -> None:
    """Rank 0's plan leaves its environment as its run ends: a process it starts later (another
    run's ranks) must not take a finished run's plan for its own."""
    os.environ.pop(PLAN_ENV, None)


@contextmanager
def start_handed_over(
    run_dir: str | os.PathLike, timeout: float, environ: Mapping[str, str] = os.environ
) -> Iterator[None]:
    """Every rank's outcome of the block (building what training needs) on every rank of a
    torchrun or srun launch: a rank whose block raised reports it and raises its own error; the
    others, their own block done, wait until every rank has reported ready or one has failed,
    and then raise `RankRefused` naming that rank and its error.

    Args:
        run_dir, timeout, environ: as `agreed_plan` takes them; `timeout` also bounds the wait
            for a rank that reports nothing (one killed outright).
    """
    roll = roll_call(run_dir, timeout, environ)
    if roll is None or _inherited(environ):  # Lightning's launcher starts the others in fit
        yield
        return
    rank = launcher_rank(environ)
    try:
        yield
    except BaseException as error:  # a datamodule, a model, a logger, Ctrl-C: any
        roll.report(rank, cause(error))
        raise
    roll.report(rank, None)
    if refused := first_refusal(roll, world_size(environ), timeout):
        raise rank_refused(*refused)


@contextmanager
def refusals_handed_over(
    run_dir: str | os.PathLike,
    timeout: float,
    started: Callable[[], bool],
    environ: Mapping[str, str] = os.environ,
) -> Iterator[None]:
    """What stops the block (`fit`) on any rank of a torchrun or srun launch before `started()`
    (the first step), told on every rank: the first rank to fail raises its own error, the others
    `RankRefused` naming it and its error, raised from their own (a collective the failed rank
    left, broken as it exited).

    Under NCCL a rank blocked in a collective is not woken by this (a blocked NCCL collective is
    only woken from another thread, by aborting its communicator): NCCL's watchdog ends it after
    `ddp_timeout_minutes`, unless the launcher ends it first as the failed rank exits (torchrun,
    `srun --kill-on-bad-exit`), naming that rank itself.

    Args:
        run_dir, timeout, environ: as `start_handed_over` takes them, whose roll call this is.
        started: whether a step has finished, past which a failure is the rank's own to tell.
    """
    try:
        yield
    except BaseException as error:
        # Past the first step a failure is the rank's own to tell; Lightning's launcher starts
        # the other ranks in fit and watches them itself (LostRank).
        roll = None if started() or _inherited(environ) else roll_call(run_dir, timeout, environ)
        if roll is None:
            raise
        rank = launcher_rank(environ)
        # Told before this process exits and breaks the others' collectives, so they find it.
        failed, told = roll.refuse(rank, cause(error))
        if failed == rank:
            raise
        raise rank_refused(failed, told) from error


def rank_refused(rank: str, told: str) -> RankRefused:
    """The error every other rank raises for global rank `rank`'s failure, `told` (its cause)."""
    return RankRefused(
        f"global rank {rank} failed before training started, so every rank stops: {told}"
    )


def _received(handed: dict) -> RunPlan:
    if "refused" in handed:
        raise RankRefused(
            f"global rank 0 refused the run, so every rank stops: {handed['refused']}"
        )
    return RunPlan.from_dict(handed["plan"])


class Channel(Protocol):
    """Where rank 0 leaves its plan for the ranks a launcher started beside it."""

    def put(self, handed: dict) -> None: ...

    def take(self) -> dict:
        """What rank 0 put, once it has; TimeoutError naming the cause if it does not in time."""


class AgentStore:
    """torchrun's agent store, under a key of this start of the workers and the `stage`."""

    def __init__(self, environ: Mapping[str, str], timeout: float, stage: str = "run_plan") -> None:
        restart = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        self.key = f"transformer_nmt/{stage}/{restart}"
        self.timeout, self.address = timeout, f"{environ['MASTER_ADDR']}:{environ['MASTER_PORT']}"
        self.store = TCPStore(
            environ["MASTER_ADDR"],
            int(environ["MASTER_PORT"]),
            is_master=False,
            timeout=timedelta(seconds=timeout),
        )

    def put(self, handed: dict) -> None:
        self.store.set(self.key, json.dumps(handed))

    def take(self) -> dict:
        try:
            return json.loads(self.store.get(self.key))
        except DistStoreError as error:
            raise TimeoutError(
                f"global rank 0 put no run plan into torchrun's store at {self.address} within "
                f"{self.timeout:.0f} s ({error}): see rank 0's log for why it stopped"
            ) from None


class PlanFile:
    """A file in the run folder, named for this start of the job."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path, self.timeout = path, timeout

    def put(self, handed: dict) -> None:
        write_atomically(self.path, json.dumps(handed))

    def take(self) -> dict:
        return json.loads(_wait_for(self.path, self.timeout, _no_plan_hint).read_text())


class RollCall(Protocol):
    """Where each rank of a launch reports whether it got ready to train, and sees the others'."""

    def report(self, rank: str, refused: str | None) -> None:
        """This rank's outcome: None if it is ready, else why it stops (`refusals.cause`)."""

    def refuse(self, rank: str, refused: str) -> tuple[str, str]:
        """This rank's refusal, unless one was reported before: the one that stands (rank,
        cause), the first, whichever rank reported it."""

    def refusal(self) -> tuple[str, str] | None:
        """A reported refusal (rank, cause), if any yet; never waits."""

    def missing(self, ranks: int) -> str | None:
        """Which of the `ranks` have not reported yet, in words; None once all have."""


def first_refusal(roll: RollCall, ranks: int, timeout: float) -> tuple[str, str] | None:
    """A rank's refusal as soon as one is reported, else None once all `ranks` reported ready;
    TimeoutError naming those that did not report within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while (missing := roll.missing(ranks)) is not None:
        if refused := roll.refusal():
            return refused
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{missing} reported neither ready to train nor failed within {timeout:.0f} s: "
                "see that rank's log for why it stopped"
            )
        time.sleep(POLL_SECONDS)
    return roll.refusal()  # one reported between the last look and the last report


class StoreRollCall:
    """torchrun's agent store: a count of the ranks that reported, and the refusal if any."""

    def __init__(self, store: AgentStore) -> None:
        self.store = store.store
        self.count, self.refused = f"{store.key}/reported", f"{store.key}/refused"

    def report(self, rank: str, refused: str | None) -> None:
        if refused is not None:  # before the count, so that a full count shows it
            self.refuse(rank, refused)
        self.store.add(self.count, 1)

    def refuse(self, rank: str, refused: str) -> tuple[str, str]:
        # Set only where no refusal is (expected ""); the value that stands comes back.
        stands = self.store.compare_set(self.refused, "", json.dumps([rank, refused]))
        failed, told = json.loads(stands)
        return failed, told

    def refusal(self) -> tuple[str, str] | None:
        if not self.store.check([self.refused]):
            return None
        rank, told = json.loads(self.store.get(self.refused))
        return rank, told

    def missing(self, ranks: int) -> str | None:
        reported = self.store.add(self.count, 0)
        return None if reported >= ranks else f"{ranks - reported} of {ranks} ranks"


class FileRollCall:
    """Files in the run folder named for this start of the job: one a rank, and the refusal."""

    def __init__(self, stem: Path) -> None:
        self.stem = stem

    def _path(self, name: str) -> Path:
        return self.stem.with_name(f"{self.stem.name}.{name}.json")

    def report(self, rank: str, refused: str | None) -> None:
        if refused is not None:  # before this rank's own file, so that a full roll shows it
            self.refuse(rank, refused)
        write_atomically(self._path(f"rank{rank}"), json.dumps({"refused": refused}))

    def refuse(self, rank: str, refused: str) -> tuple[str, str]:
        mine = self._path(f"rank{rank}.refused")
        write_atomically(mine, json.dumps([rank, refused]))
        try:  # a hard link fails where the file is, on every host of a shared file system
            os.link(mine, self._path("refused"))
        except FileExistsError:
            pass
        finally:
            mine.unlink()
        return self.refusal() or (rank, refused)

    def refusal(self) -> tuple[str, str] | None:
        path = self._path("refused")
        if not path.is_file():
            return None
        rank, told = json.loads(path.read_text())
        return rank, told

    def missing(self, ranks: int) -> str | None:
        absent = [str(r) for r in range(ranks) if not self._path(f"rank{r}").is_file()]
        return f"global rank(s) {', '.join(absent)}" if absent else None


def roll_call(
    run_dir: str | os.PathLike, timeout: float, environ: Mapping[str, str] = os.environ
) -> RollCall | None:
    """Where the ranks of this launch report getting ready to train: as `launch_channel` hands
    over the plan, under the stage `started`."""
    channel = launch_channel(run_dir, timeout, environ, stage="started")
    if isinstance(channel, AgentStore):
        return StoreRollCall(channel)
    if isinstance(channel, PlanFile):
        return FileRollCall(channel.path.with_suffix(""))
    return None


def launch_channel(
    run_dir: str | os.PathLike,
    timeout: float,
    environ: Mapping[str, str] = os.environ,
    stage: str = "run_plan",
) -> Channel | None:
    """torchrun's agent store, else a plan file named by `launch_key`; None where no launcher
    starts several ranks at once. `stage` tells apart what rank 0 hands over: its plan, then
    whether it started."""
    if environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and world_size(environ) > 1:
        return AgentStore(environ, timeout, stage)
    key = launch_key(environ)
    if key is None:
        return None
    return PlanFile(plan_file(run_dir, key if stage == "run_plan" else f"{key}.{stage}"), timeout)


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
    if world_size(environ) < 2:
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


def world_size(environ: Mapping[str, str]) -> int:
    """The ranks torchrun or srun started (1 where neither did)."""
    return int(environ.get("WORLD_SIZE", environ.get("SLURM_NTASKS", 1)))


def plan_file(run_dir: str | os.PathLike, key: str) -> Path:
    return Path(run_dir) / FOLDER / f"{key}.json"
