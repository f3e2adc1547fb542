"""The trials of a study that several workers share: which count, who runs them, which go on.

Every worker asks its trials of the one study and tells their results; nothing else is shared.
A study's `n_trials` counts every trial but those a worker withdrew when another took the last
free one first (`surplus`), so the workers together run exactly `n_trials`, however many there
are.

A trial that did not end goes on, under its own number, in its own folder, with its own
parameters and seed, from its `last.ckpt`: its worker was stopped (a signal, a pre-emption, a
lost storage) or provably died. It is put back to wait (`WAITING`, with the reason added to its
`stops`), and Optuna hands waiting trials out before it samples a new one. One record per trial
keeps the dashboard's numbers those of the sweep folders; `stops` keeps each interruption.

A running trial's worker is dead when it provably is: its heartbeat silent for longer than
`heartbeat_timeout` while the judging worker reached the storage (`_heartbeat.Silences`), or its
process gone as seen from the worker's own boot and PID namespace (a hostname proves nothing:
containers share one). Any other running trial is waited for, and the log says on whom.
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

from ._heartbeat import Silences, beat, heartbeat_ages, underlying

log = logging.getLogger(__name__)

# User attributes of a trial.
WORKER = "worker"  # who runs it: {"host", "namespace", "pid", "start"}
STOPS = "stops"  # why it was put back to wait, once per interruption, oldest first
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
    return bool(trial.user_attrs.get(SURPLUS)) and trial.state == TrialState.FAIL


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


def owned_by_this_worker(trial: FrozenTrial) -> bool:
    return trial.state == TrialState.RUNNING and trial.user_attrs.get(WORKER) == this_worker()


def resume_dead_trials(
    study: optuna.Study, storage: BaseStorage, silences: Silences | None = None
) -> list[int]:
    """Puts back to wait, to be resumed first, the running trials whose worker is provably dead.

    Dead is: its heartbeat silent for longer than the timeout of `silences`, or its process gone
    as seen from this boot and PID namespace. A live worker's trial, in this namespace or
    another, is never touched. Returns the numbers of the trials put back.
    """
    silent = silences.silent_trials(study, storage) if silences else {}
    resumed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        why = _why_dead(trial, silent)
        if why is None:
            continue
        worker = describe(trial.user_attrs.get(WORKER))
        if not put_back(storage, trial, f"its worker {worker} is dead ({why})"):
            continue
        log.warning(
            "Trial %d: its worker %s is dead (%s); it waits to be resumed from its last checkpoint",
            trial.number,
            worker,
            why,
        )
        resumed.append(trial.number)
    return resumed


def put_back(storage: BaseStorage, trial: FrozenTrial, why: str) -> bool:
    """Puts a running trial back to wait, adding `why` to its stops; whether it was.

    Not if it has been told or started again since `trial` was read: read again just before.
    """
    now = underlying(storage).get_trial(trial._trial_id)
    if now.state != TrialState.RUNNING or now.datetime_start != trial.datetime_start:
        return False
    try:
        storage.set_trial_user_attr(trial._trial_id, STOPS, [*now.user_attrs.get(STOPS, []), why])
        storage.set_trial_state_values(trial._trial_id, state=TrialState.WAITING)
    except UpdateFinishedTrialError:
        return False  # its worker told it just now
    return True


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
    """Asks up to `batch` trials, as many as the study's n_trials still leave free: first those
    waiting to be resumed, with their parameters, then new ones."""
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    free = n_trials - len(counted_trials(study)) + len(waiting)  # a waiting trial is counted
    claimed = []
    for _ in range(min(batch, free)):
        with warnings.catch_warnings():  # that heartbeats are for Study.optimize: ours run them
            warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
            trial = study.ask(space)
        trial.set_user_attr(WORKER, this_worker())
        beat(study._storage, trial._trial_id)  # from its start: a silent trial is a dead one
        if not keep_if_counted(study, trial, n_trials):
            break
        if stops := study._storage.get_trial(trial._trial_id).user_attrs.get(STOPS):
            log.info(
                "Trial %d resumes in its folder, from its last checkpoint (stopped: %s)",
                trial.number,
                stops[-1],
            )
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
