"""A running trial's heartbeat, on a database or a journal file, judged by the storage's clock.

A database stamps a trial's heartbeat with its own clock (Optuna's `trial_heartbeats`); a journal
file keeps it as a trial attribute, the time its filesystem gives a file made at the beat
(`processes.filesystem_now`). Either way a trial's silence is judged by that one clock, never by
the judging host's, which may run ahead of the beating host's.

A worker's beats go on through storage faults, tried again with backoff. After
`storage_timeout` seconds without one the worker stops: it names the storage and sends itself
SIGTERM, so its run saves and ends as at any stop, and its trial is left to the other workers.
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

from transformer_nmt.runtime.processes import filesystem_now

from ._storage import FIRST_RETRY, STORAGE_ERRORS, journal_folder, lost_message, reason, shown

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


def silent_trials(study: optuna.Study, storage: BaseStorage, timeout: float) -> dict[int, str]:
    """The running trials silent for longer than `timeout` s, by id: how long, in words.

    A database judges by the grace period it was opened with (`open_storage` gives it `timeout`).
    """
    storage = underlying(storage)
    if isinstance(storage, RDBStorage):
        if storage.heartbeat_interval is None:
            return {}
        grace = storage.grace_period or 2 * storage.heartbeat_interval
        silent = f"no heartbeat for over {grace:g} s by the database's clock"
        return dict.fromkeys(storage._get_stale_trial_ids(study._study_id), silent)
    ages = heartbeat_ages(study, storage)
    return {
        trial_id: f"no heartbeat for {age:.1f} s by the journal's filesystem clock"
        for trial_id, age in ages.items()
        if age > timeout
    }


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

    `lost` is the message naming the storage once it failed for longer than `timeout` s; the
    worker has then been stopped by `stop`. No stop is sent once the block has ended.
    """

    def __init__(
        self,
        storage: BaseStorage,
        trials: list[FrozenTrial] | list[optuna.Trial],
        interval: float | None,
        spec: str | None,
        timeout: float,
        stop: Callable[[], None] = stop_this_process,
    ) -> None:
        self.storage, self.trial_ids = storage, [t._trial_id for t in trials]
        self.interval, self.spec, self.timeout, self.stop = interval, spec, timeout, stop
        self.lost: str | None = None
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
                self._beat_all()
            except STORAGE_ERRORS as e:
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
            last, delay = time.monotonic(), self.interval

    def _beat_all(self) -> None:
        for trial_id in list(self.trial_ids):
            try:
                beat(self.storage, trial_id)
            except UpdateFinishedTrialError:  # another worker took it for dead: nothing to keep
                self.trial_ids.remove(trial_id)

    def _give_up(self, error: BaseException) -> None:
        with self._ending:
            if self._done.is_set():
                return
            self.lost = lost_message(self.spec, self.timeout, error)
            log.error("%s", self.lost)
            self.stop()
