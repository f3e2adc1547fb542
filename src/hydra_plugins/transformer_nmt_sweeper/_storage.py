"""Where a study lives: a journal file (one machine, or a shared filesystem) or a database URL."""

import time
import warnings
from pathlib import Path

import optuna
import sqlalchemy.exc
from hydra.errors import CompactHydraException
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from sqlalchemy.engine import make_url


class StorageUnreachable(CompactHydraException, RuntimeError):
    """The study's database refused or did not answer the connection: Hydra prints the message,
    which says what to do, without a traceback."""


def open_storage(storage: str | None, heartbeat_interval: int | None = None) -> BaseStorage:
    """The storage that `hydra.sweeper.storage` names.

    A URL (`postgresql://user@host:5432/db`, `sqlite:///path.db`) is an Optuna RDB storage, whose
    heartbeats every `heartbeat_interval` seconds let any worker fail the trials of a worker that
    died, on whatever machine; a path is an Optuna journal file, which the workers of one machine
    (or of several, on a shared filesystem) append to under a lock file; None keeps the study in
    this process's memory only.
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
    with warnings.catch_warnings():  # heartbeats are "experimental" since Optuna 2.9
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        for attempt in range(tries - 1):
            try:
                return RDBStorage(storage, heartbeat_interval=heartbeat_interval)
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
                time.sleep(0.1 * (attempt + 1))  # let the other worker's transaction commit
        return RDBStorage(storage, heartbeat_interval=heartbeat_interval)


def shown(storage: str | None) -> str:
    """The storage as a log may show it: a URL's password masked."""
    if storage is None or "://" not in storage:
        return str(storage)
    return make_url(storage).render_as_string(hide_password=True)


def _unreachable(url: sqlalchemy.engine.URL, error: Exception) -> str:
    reason = str(getattr(error, "orig", error)).strip().splitlines()[0]
    return (
        f"hydra.sweeper.storage={url.render_as_string(hide_password=True)} cannot be reached "
        f"({reason}). No trial has run. "
        "Start the database server and create the database first, e.g. for PostgreSQL: "
        "`initdb -D pgdata && pg_ctl -D pgdata -l pgdata/log start && "
        f"createdb {url.database or '<database>'}`, then run the sweep again; or keep the study "
        "in a file on one machine with hydra.sweeper.storage=<path>/optuna.journal"
    )
