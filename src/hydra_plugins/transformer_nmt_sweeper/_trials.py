"""The trials of a study that several workers share: which count, who runs them, which are dead.

Every worker asks its trials of the one study and tells their results; nothing else is shared.
A study's `n_trials` counts every trial but those a dead worker left (`interrupted`) and those a
worker withdrew when another took the last free one first (`surplus`), so the workers together
run exactly `n_trials`, however many there are.
"""

import logging
import os
import socket
import warnings
from pathlib import Path

import optuna
from optuna.distributions import BaseDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled
from optuna.trial import FrozenTrial, TrialState

log = logging.getLogger(__name__)

# User attributes of a trial.
WORKER = "worker"  # who runs it: "<host>:<pid>:<process start time>"
INTERRUPTED = "interrupted"  # its worker died while it ran: it does not count
SURPLUS = "surplus"  # asked when another worker had taken the last free trial: it does not count


def this_worker() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start(pid)}"


def _process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), None if there is no such process.

    With the pid alone, a new process that happens to get a dead worker's pid would keep the dead
    worker's trial alive.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name before ")" may hold spaces


def counted_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The trials that take one of the study's n_trials: run, running or enqueued to run."""
    return [t for t in study.get_trials(deepcopy=False) if not _uncounted(t)]


def _uncounted(trial: FrozenTrial) -> bool:
    # By state too: a worker that told its result as another marked it dead still counts it.
    marked = trial.user_attrs.get(INTERRUPTED) or trial.user_attrs.get(SURPLUS)
    return bool(marked) and trial.state == TrialState.FAIL


def finished_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The counted trials that ran to an end: complete, pruned, or failed by their own error."""
    return [t for t in counted_trials(study) if t.state.is_finished()]


def _owner_is_gone(trial: FrozenTrial) -> bool:
    """Whether the trial's worker ran on this host and that process has ended."""
    worker = trial.user_attrs.get(WORKER)
    if worker is None:
        return False  # asked by something else: nothing proves it dead
    host, pid, start = worker.rsplit(":", 2)
    if host != socket.gethostname() or not Path("/proc/self/stat").exists():
        return False  # another host's process, or no /proc (not Linux): nothing to look at
    return _process_start(int(pid)) != start


def _stale(study: optuna.Study, storage: BaseStorage) -> set[int]:
    """The trial ids whose heartbeat stopped, where the storage keeps heartbeats."""
    if not (isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage)):
        return set()
    return set(storage._get_stale_trial_ids(study._study_id))


def fail_dead_trials(study: optuna.Study, storage: BaseStorage) -> list[int]:
    """Marks failed and interrupted the running trials whose worker is provably dead.

    Dead is: its heartbeat stopped (database storages with `heartbeat_interval`), or its worker
    ran on this host and that process is gone. A live worker's trial, on this host or another,
    is never touched. Returns the numbers of the trials failed.
    """
    stale = _stale(study, storage)
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if trial._trial_id not in stale and not _owner_is_gone(trial):
            continue
        try:
            storage.set_trial_user_attr(trial._trial_id, INTERRUPTED, True)
            storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
        except UpdateFinishedTrialError:
            continue  # another worker failed it first, or its worker told it just now
        log.warning(
            "Trial %d: its worker %s is gone; marked failed", trial.number, trial.user_attrs[WORKER]
        )
        failed.append(trial.number)
    return failed


def claim_trials(
    study: optuna.Study, n_trials: int, batch: int, space: dict[str, BaseDistribution]
) -> list[optuna.Trial]:
    """Asks up to `batch` trials, as many as the study's n_trials still leave free."""
    free = n_trials - len(counted_trials(study))
    claimed = []
    for _ in range(min(batch, free)):
        with warnings.catch_warnings():  # that heartbeats are for Study.optimize: ours run them
            warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
            trial = study.ask(space)
        trial.set_user_attr(WORKER, this_worker())
        if not keep_if_counted(study, trial, n_trials):
            break
        claimed.append(trial)
    return claimed


def keep_if_counted(study: optuna.Study, trial: optuna.Trial, n_trials: int) -> bool:
    """Whether a trial just asked is one of the study's n_trials; withdrawn (surplus) if not.

    Two workers may ask for the last free trial at once. A trial stays if fewer than n_trials
    counted trials have a lower number, which only trials asked earlier decide: of two racing
    workers the later trial is withdrawn, and never both.
    """
    ahead = [t for t in counted_trials(study) if t.number < trial.number]
    if len(ahead) < n_trials:
        return True
    trial.set_user_attr(SURPLUS, True)
    study.tell(trial, state=TrialState.FAIL)
    log.info("Trial %d: the study's %d trials are taken; withdrawn", trial.number, n_trials)
    return False
