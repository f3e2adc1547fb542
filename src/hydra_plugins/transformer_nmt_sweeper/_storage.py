"""Where a study lives: a journal file (one machine, or a shared filesystem) or a database URL,
and how a worker rides out the storage's passing faults."""

import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import optuna
import sqlalchemy.exc
from hydra.errors import CompactHydraException
from optuna.exceptions import StorageInternalError
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)
T = TypeVar("T")

# A dropped connection, a restarting server, a shared filesystem's passing error.
STORAGE_ERRORS = (
    StorageInternalError,
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    OSError,
)
FIRST_RETRY, MAX_RETRY = 0.5, 10.0  # seconds between tries, doubling


class StorageUnreachable(CompactHydraException, RuntimeError):
    """The study's database refused or did not answer the connection: Hydra prints the message,
    which says what to do, without a traceback."""


class StorageLost(CompactHydraException, RuntimeError):
    """The study's storage failed every try for longer than `hydra.sweeper.storage_timeout`: Hydra
    prints the message, which names it, without a traceback."""


class Contacts:
    """When this worker last came back to the storage after a failed call.

    A running trial's silence is counted from then at the earliest: while this worker could not
    reach the storage, the trial's worker may not have reached it either.
    """

    def __init__(self) -> None:
        self.back_since = time.monotonic()
        self._failing = False

    def reached(self) -> None:
        if self._failing:
            self._failing = False
            self.back_since = time.monotonic()

    def missed(self) -> None:
        self._failing = True


def open_storage(storage: str | None, heartbeat_interval: int | None = None) -> BaseStorage:
    """The storage that `hydra.sweeper.storage` names.

    A URL (`postgresql://user@host:5432/db`, `sqlite:///path.db`) is an Optuna RDB storage,
    whose connections are tested before use (a restarted server's are not handed out) and whose
    heartbeats, stamped by the server's clock every `heartbeat_interval` seconds, let any worker
    resume the trials of a silent worker (`_heartbeat.Silences`); a path is an Optuna journal file,
    which the workers of one machine (or of several, on a shared filesystem) append to under a
    lock file; None keeps the study in this process's memory only.
    """
    if storage is None:
        return InMemoryStorage()
    if "://" not in storage:
        Path(storage).parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(storage))
    url = make_url(storage)
    if url.get_backend_name() == "sqlite" and url.database:
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)  # SQLite makes no folders
    try:
        return _rdb_storage(storage, heartbeat_interval)
    except sqlalchemy.exc.OperationalError as e:
        raise StorageUnreachable(_unreachable(url, e)) from e


def _rdb_storage(storage: str, heartbeat_interval: int | None, tries: int = 3) -> RDBStorage:
    """An RDBStorage, tried again when another worker creates the same tables at the same time."""
    settings = {"engine_kwargs": {"pool_pre_ping": True}, "heartbeat_interval": heartbeat_interval}
    with warnings.catch_warnings():  # heartbeats are "experimental" since Optuna 2.9
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        for attempt in range(tries - 1):
            try:
                return RDBStorage(storage, **settings)
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
                time.sleep(0.1 * (attempt + 1))  # let the other worker's transaction commit
        return RDBStorage(storage, **settings)


def journal_folder(storage: BaseStorage) -> Path | None:
    """The folder of a journal storage's file, whose filesystem's clock judges its heartbeats."""
    if isinstance(storage, JournalStorage) and isinstance(storage._backend, JournalFileBackend):
        return Path(storage._backend._file_path).parent
    return None


def retrying(
    call: Callable[[], T], storage: str | None, timeout: float, contacts: Contacts | None = None
) -> T:
    """`call()`, tried again with backoff while the storage fails, for up to `timeout` seconds.

    Raises `StorageLost`, naming the storage, once it has failed for longer. `contacts` learns of
    each failure and success.
    """
    first_failure, delay = None, FIRST_RETRY
    while True:
        try:
            result = call()
        except STORAGE_ERRORS as e:
            if contacts is not None:
                contacts.missed()
            now = time.monotonic()
            first_failure = first_failure or now
            if now - first_failure > timeout:
                raise StorageLost(lost_message(storage, timeout, e)) from None
            log.warning(
                "Storage %s failed (%s): trying again in %.1f s", shown(storage), reason(e), delay
            )
        else:
            if contacts is not None:
                contacts.reached()
            return result
        time.sleep(delay)
        delay = min(2 * delay, MAX_RETRY)


def lost_message(storage: str | None, timeout: float, error: BaseException) -> str:
    return (
        f"hydra.sweeper.storage={shown(storage)} could not be reached for more than "
        f"hydra.sweeper.storage_timeout={timeout:g} s ({reason(error)}): this worker stops. Its "
        "running trials are left to the other workers, which resume them once their heartbeat has "
        "been silent for hydra.sweeper.heartbeat_timeout; start the server again and run the same "
        "command to go on with the study."
    )


def reason(error: BaseException) -> str:
    """An error's first line, through Optuna's and SQLAlchemy's wrappers to the driver's."""
    while isinstance(error, StorageInternalError) and error.__cause__ is not None:
        error = error.__cause__
    lines = str(getattr(error, "orig", None) or error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def shown(storage: str | None) -> str:
    """The storage as a log may show it: a URL's password masked."""
    if storage is None or "://" not in storage:
        return str(storage)
    return make_url(storage).render_as_string(hide_password=True)


def _unreachable(url: sqlalchemy.engine.URL, error: Exception) -> str:
    return (
        f"hydra.sweeper.storage={url.render_as_string(hide_password=True)} cannot be reached "
        f"({reason(error)}). No trial has run. "
        "Start the database server and create the database first, e.g. for PostgreSQL: "
        "`initdb -D pgdata && pg_ctl -D pgdata -l pgdata/log start && "
        f"createdb {url.database or '<database>'}`, then run the sweep again; or keep the study "
        "in a file on one machine with hydra.sweeper.storage=<path>/optuna.journal"
    )
