"""Whether another process is provably gone, and the time as a shared filesystem tells it.

A hostname does not say where a process runs: containers with host networking share it but not
their processes, and a pid means something only in its own PID namespace of its own boot. So a
process is named by its `namespace` (boot id and PID namespace), pid and start time, and judged
gone only from inside the same namespace. Hosts' clocks differ too: a time stored for others to
judge is the filesystem's (`filesystem_now`), as the file server stamps a file it creates.
"""

import os
import uuid
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PID_NAMESPACE = Path("/proc/self/ns/pid")


def namespace() -> str | None:
    """This process's boot and PID namespace, "<boot id>/<namespace inode>"; None off Linux."""
    try:
        return f"{BOOT_ID.read_text().strip()}/{PID_NAMESPACE.stat().st_ino}"
    except OSError:
        return None


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), None if there is no such process.

    With the pid alone, a new process that happens to get a dead one's pid would pass for it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name before ")" may hold spaces


def this_process() -> dict[str, object]:
    """This process as others may judge it: see `is_gone`."""
    pid = os.getpid()
    return {"namespace": namespace(), "pid": pid, "start": process_start(pid)}


def is_gone(process: dict[str, object]) -> bool:
    """Whether a process that `this_process` described has provably ended.

    Only from its own boot and PID namespace; anywhere else, or without a namespace, nothing is
    proved and it is taken for alive.
    """
    here = namespace()
    if here is None or process.get("namespace") != here or not isinstance(process.get("pid"), int):
        return False
    start = process.get("start")
    found = process_start(process["pid"])
    return found is None or (start is not None and found != start)


def filesystem_now(folder: str | os.PathLike) -> float:
    """The time on the filesystem of `folder`: the mtime its server gives a file made now."""
    probe = Path(folder) / f".clock.{uuid.uuid4().hex}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        return os.fstat(fd).st_mtime
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)
