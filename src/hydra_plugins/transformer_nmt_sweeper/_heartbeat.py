"""A running trial's heartbeat, and how long a worker has seen it silent.

A database stamps a trial's heartbeat with its own clock (Optuna's `trial_heartbeats`); a journal
file keeps it as a trial attribute, the time its filesystem gives a file made at the beat
(`processes.filesystem_now`). A judging worker reads a stamp only to see whether a new beat came:
it times the silence on its own monotonic clock, and only over time in which it reached the
storage itself (`Contacts`). A storage outage is no one's silence, however long: after it every
trial's silence starts again from zero. No two hosts' clocks are ever compared.

A worker's beats go on through storage faults, tried again with backoff. After
`storage_timeout` seconds without one the worker stops: it names the storage and sends itself
SIGTERM, so its run saves and ends as at any stop, and its trial is left to the other workers.
A worker that finds its trial taken from it (judged dead, wrongly, while only it was cut off)
stops the trial's run at once, saying so: its last checkpoint goes on wherever the trial runs.
"""

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import TracebackType

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage, RDBStorage
from optuna.storages._cached_storage import _CachedStorage
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import bindparam, text

from transformer_nmt.runtime.processes import filesystem_now

from ._storage import (
    FIRST_RETRY,
    STORAGE_ERRORS,
    Contacts,
    journal_folder,
    lost_message,
    reason,
    shown,
)

log = logging.getLogger(__name__)

HEARTBEAT = "heartbeat"  # a journal trial's system attribute: its filesystem time at the last beat


def beat(storage: BaseStorage, trial_id: int) -> None:
    """Records that the trial's worker is alive, where the storage keeps heartbeats."""
    storage = underlying(storage)
    if isinstance(storage, RDBStorage):
        if storage.heartbeat_interval is not None:
            storage.record_heartbeat(trial_id)
    elif (folder := journal_folder(storage)) is not None:
        storage.set_trial_system_attr(trial_id, HEARTBEAT, filesystem_now(folder))


class Silences:
    """How long this worker has seen each running trial without a new beat, while it reached the
    storage (`contacts`); the trials silent for longer than `timeout` s are dead."""

    def __init__(self, contacts: Contacts, timeout: float) -> None:
        self.contacts, self.timeout = contacts, timeout
        # By trial id: the beat and start last read, and when this worker first read them.
        self._seen: dict[int, tuple[object, float]] = {}
        self._back = contacts.back_since

    def silent_trials(self, study: optuna.Study, storage: BaseStorage) -> dict[int, str]:
        """The running trials silent for longer than the timeout, by id: how long, in words."""
        beats = last_beats(study, storage)
        self.contacts.reached()  # before the silences: a read after an outage ends it
        now = time.monotonic()
        if self.contacts.back_since != self._back and beats:
            log.info(
                "Storage reached again: the heartbeats of running trials %s are timed from now",
                ", ".join(str(t.number) for t in _running(study) if t._trial_id in beats),
            )
        self._back = self.contacts.back_since
        self._seen = {id_: self._since(id_, beat, now) for id_, beat in beats.items()}
        silent = {
            trial_id: now - max(since, self.contacts.back_since)
            for trial_id, (_, since) in self._seen.items()
        }
        return {
            trial_id: f"no heartbeat for {seconds:.1f} s while this worker reached the storage"
            for trial_id, seconds in silent.items()
            if seconds > self.timeout
        }

    def _since(self, trial_id: int, beat: object, now: float) -> tuple[object, float]:
        before = self._seen.get(trial_id)
        return before if before is not None and before[0] == beat else (beat, now)


def last_beats(study: optuna.Study, storage: BaseStorage) -> dict[int, tuple[object, object]]:
    """The running trials that have beaten, by id: their last beat's stamp and their start (a
    trial resumed is a new story, even before its first beat there)."""
    storage = underlying(storage)
    running = _running(study)
    if isinstance(storage, RDBStorage):
        if storage.heartbeat_interval is None or not running:
            return {}
        query = text("SELECT trial_id, heartbeat FROM trial_heartbeats WHERE trial_id IN :ids")
        query = query.bindparams(bindparam("ids", expanding=True))
        with storage.engine.connect() as db:
            rows = db.execute(query, {"ids": [t._trial_id for t in running]}).all()
        stamps = dict(rows)
    else:
        stamps = {t._trial_id: t.system_attrs.get(HEARTBEAT) for t in running}
    return {
        t._trial_id: (stamps[t._trial_id], t.datetime_start)
        for t in running
        if stamps.get(t._trial_id) is not None
    }


def _running(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))


def heartbeat_ages(study: optuna.Study, storage: BaseStorage) -> dict[int, float]:
    """Seconds since each running trial's last beat, by id, where a journal tells it."""
    folder = journal_folder(storage)
    if folder is None:
        return {}
    now = filesystem_now(folder)
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    return {
        t._trial_id: now - t.system_attrs[HEARTBEAT] for t in running if HEARTBEAT in t.system_attrs
    }


def underlying(storage: BaseStorage) -> BaseStorage:
    """The storage itself: a study wraps a database's in Optuna's cache."""
    return storage._backend if isinstance(storage, _CachedStorage) else storage


def stop_this_process() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # the run's stop: it saves and ends


class Beating:
    """While the block runs, beats for `trials` every `interval` s in a thread, riding out faults.

    `lost` is the message naming the storage once it failed for longer than `timeout` s; `taken`
    the one naming a trial that is no longer this worker's (`owns` says whose it is). Either way
    the worker has been stopped by `stop`. No stop is sent once the block has ended. `contacts`
    learns of each beat that reached the storage and each that did not.
    """

    def __init__(
        self,
        storage: BaseStorage,
        trials: list[FrozenTrial] | list[optuna.Trial],
        interval: float | None,
        spec: str | None,
        timeout: float,
        owns: Callable[[FrozenTrial], bool],
        contacts: Contacts | None = None,
        stop: Callable[[], None] = stop_this_process,
    ) -> None:
        self.storage, self.trial_ids = storage, [t._trial_id for t in trials]
        self.interval, self.spec, self.timeout, self.stop = interval, spec, timeout, stop
        self.owns, self.contacts = owns, contacts or Contacts()
        self.lost: str | None = None
        self.taken: str | None = None
        self._done = threading.Event()
        self._ending = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name="trial heartbeat")

    def __enter__(self) -> "Beating":
        if self.interval is not None:  # None: the storage keeps no heartbeats
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with self._ending:
            self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        last, delay = time.monotonic(), self.interval
        while not self._done.wait(delay):
            try:
                taken = self._beat_all()
            except STORAGE_ERRORS as e:
                self.contacts.missed()
                if time.monotonic() - last > self.timeout:
                    self._give_up(e)
                    return
                delay = (
                    min(FIRST_RETRY, self.interval)
                    if delay == self.interval
                    else min(2 * delay, self.interval)
                )
                log.warning(
                    "Heartbeat to %s failed (%s): again in %.1f s",
                    shown(self.spec),
                    reason(e),
                    delay,
                )
                continue
            self.contacts.reached()
            if taken is not None:
                self._end(taken=taken_message(taken))
                return
            last, delay = time.monotonic(), self.interval

    def _beat_all(self) -> FrozenTrial | None:
        """Beats for each trial while it is this worker's; the first that is not, if any."""
        for trial_id in self.trial_ids:
            trial = underlying(self.storage).get_trial(trial_id)
            if not self.owns(trial):
                return trial
            try:
                beat(self.storage, trial_id)
            except UpdateFinishedTrialError:  # told by another worker since it was read
                return underlying(self.storage).get_trial(trial_id)
        return None

    def _give_up(self, error: BaseException) -> None:
        self._end(lost=lost_message(self.spec, self.timeout, error))

    def _end(self, lost: str | None = None, taken: str | None = None) -> None:
        with self._ending:
            if self._done.is_set():
                return
            self.lost, self.taken = lost, taken
            log.error("%s", lost or taken)
            self.stop()


def taken_message(trial: FrozenTrial) -> str:
    goes_on = (
        "was told by the worker that resumed it"
        if trial.state.is_finished()
        else "goes on wherever the trial is asked next"
    )
    return (
        f"Trial {trial.number} is no longer this worker's: another worker found its heartbeat "
        f"silent and put it back ({trial.state.name.lower()} now). Its run stops here, with its "
        f"last checkpoint, and {goes_on}"
    )
