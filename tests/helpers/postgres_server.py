"""A real PostgreSQL server for tests: a new cluster in a temporary folder, reached through its
Unix socket only (no port to clash with), run as an unprivileged user since PostgreSQL refuses
root. Debian's `postgresql` package provides it (`.ci/run` installs it)."""

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise FileNotFoundError(
            f"PostgreSQL's {name} is not installed: apt-get install postgresql (see .ci/run)"
        )
    return found[-1]  # the newest major version


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "nobody", "--", *command] if os.geteuid() == 0 else command


# A throwaway server need not survive a crash of the machine: nothing waits on the disk. Its
# sessions, commits, restarts and stops behave as a durable server's do.
INITDB = ["-U", "postgres", "--auth=trust", "--no-sync"]
NON_DURABLE = "-c fsync=off"


@contextmanager
def postgres_server() -> Iterator[Path]:
    """Runs a server for the duration; yields the folder of its socket."""
    # Not under pytest's tmp_path, which the server's user may not enter.
    folder = Path(tempfile.mkdtemp(prefix="nmt-postgres-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "nobody")
    data = folder / "data"
    run = {"check": True, "capture_output": True}
    try:
        subprocess.run(
            _as_server_user([_bin("initdb"), *INITDB, "-D", str(data)]),
            **run,
        )
        start = [*_pg_ctl(folder), "-o", _options(folder), "-w"]
        subprocess.run(_as_server_user([*start, "start"]), **run)  # -w: until it accepts
        try:
            yield folder
        finally:
            stop = [_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
            subprocess.run(_as_server_user(stop), capture_output=True)  # a test may have stopped it
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pg_ctl(socket_folder: Path, action: str) -> None:
    """`pg_ctl restart`, `stop` (fast: sessions cut, as a failover cuts them) or `start` on the
    server."""
    options = ["-o", _options(socket_folder)] if action == "start" else []
    command = [*_pg_ctl(socket_folder), *options, "-m", "fast", "-w", action]
    subprocess.run(_as_server_user(command), check=True, capture_output=True)


def _pg_ctl(folder: Path) -> list[str]:
    # -l: a (re)started server writes to its log, not to the caller's pipes, which then close.
    return [_bin("pg_ctl"), "-D", str(folder / "data"), "-l", str(folder / "log")]


def _options(folder: Path) -> str:
    return f"-k {folder} -c listen_addresses='' {NON_DURABLE}"  # the socket only


def create_database(socket_folder: Path, name: str) -> str:
    """Creates database `name`; its SQLAlchemy URL."""
    createdb = [_bin("createdb"), "-h", str(socket_folder), "-U", "postgres", name]
    subprocess.run(createdb, check=True, capture_output=True)
    return f"postgresql://postgres@/{name}?host={socket_folder}"
