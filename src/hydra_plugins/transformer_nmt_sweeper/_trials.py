"""The trials of a study that several workers share: which count, who runs them, which are dead.

Every worker asks its trials of the one study and tells their results; nothing else is shared.
A study's `n_trials` counts every trial but those a dead worker left (`interrupted`) and those a
worker withdrew when another took the last free one first (`surplus`), so the workers together
run exactly `n_trials`, however many there are.

A running trial's worker is dead when it provably is: its heartbeat silent for longer than
`heartbeat_timeout` by the storage's clock, or its process gone as seen from the worker's own
boot and PID namespace (a hostname proves nothing: containers share one). Any other running
trial is waited for, and the log says on whom.
"""

import logging
import socket
import warnings

import optuna
from optuna.distributions import BaseDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from transformer_nmt.runtime.processes import is_gone, this_process

from ._heartbeat import beat, heartbeat_ages, silent_trials

log = logging.getLogger(__name__)

# User attributes of a trial.
WORKER = "worker"  # who runs it: {"host", "namespace", "pid", "start"}
INTERRUPTED = "interrupted"  # its worker died while it ran: it does not count
SURPLUS = "surplus"  # asked when another worker had taken the last free trial: it does not count


def this_worker() -> dict[str, object]:
    return {"host": socket.gethostname(), **this_process()}


def describe(worker: object) -> str:
    """A trial's worker for people: "process 42 on node-3"."""
    if not isinstance(worker, dict):
        return f"worker {worker}" if worker else "no named worker"
    return f"process {worker.get('pid')} on {worker.get('host')}"


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


def _why_dead(trial: FrozenTrial, silent: dict[int, str]) -> str | None:
    """Why the trial's worker is provably dead; None if it is not."""
    if trial._trial_id in silent:
        return silent[trial._trial_id]
    worker = trial.user_attrs.get(WORKER)
    if isinstance(worker, dict) and is_gone(worker):
        return "its process gone from this boot and PID namespace"
    return None


def fail_dead_trials(
    study: optuna.Study, storage: BaseStorage, heartbeat_timeout: float = 120
) -> list[int]:
    """Marks failed and interrupted the running trials whose worker is provably dead.

    Dead is: its heartbeat silent for longer than `heartbeat_timeout` seconds, or its process
    gone as seen from this boot and PID namespace. A live worker's trial, in this namespace or
    another, is never touched. Returns the numbers of the trials failed.
    """
    silent = silent_trials(study, storage, heartbeat_timeout)
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        why = _why_dead(trial, silent)
        if why is None:
            continue
        try:
            storage.set_trial_user_attr(trial._trial_id, INTERRUPTED, True)
            storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
        except UpdateFinishedTrialError:
            continue  # another worker failed it first, or its worker told it just now
        worker = describe(trial.user_attrs.get(WORKER))
        log.warning(
            "Trial %d: its worker %s is dead (%s); marked failed", trial.number, worker, why
        )
        failed.append(trial.number)
    return failed


def waiting_on(study: optuna.Study, storage: BaseStorage) -> dict[int, str]:
    """The running trials by number: their worker, and how long ago it beat where that is known."""
    ages = heartbeat_ages(study, storage)
    running = {}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        age = ages.get(trial._trial_id)
        beat_ago = "" if age is None else f", last heartbeat {age:.1f} s ago"
        running[trial.number] = f"{describe(trial.user_attrs.get(WORKER))}{beat_ago}"
    return running


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
        beat(study._storage, trial._trial_id)  # from its start: a silent trial is a dead one
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
