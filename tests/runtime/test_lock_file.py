"""A lock file without flock: one holder at a time; a gone holder's lock is taken over, named."""

import errno
import json
import logging
import os
import socket
import subprocess
import threading
import time

from transformer_nmt.runtime import lock_file
from transformer_nmt.runtime.lock_file import FIRST_POLL, MAX_POLL, SAY_EVERY, LockFile
from transformer_nmt.runtime.processes import namespace

OTHER_HOST = {"pid": 7, "host": "node-b", "since": "2025-01-01T00:00:00+00:00", "token": "b"}
NAMED = "process 7 on node-b, since 2025-01-01T00:00:00+00:00"


def files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def write_lock(path, holder, mtime: float | None = None) -> None:
    path.write_text(json.dumps(holder))
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def dead_pid() -> int:
    """The pid of a process of this host that has ended."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def never_sleeps(seconds):
    raise AssertionError(f"waited {seconds} s for a lock that should have been taken at once")


def test_a_dead_process_s_lock_on_this_host_is_taken_over_at_once_naming_it(tmp_path, caplog):
    here, pid = socket.gethostname(), dead_pid()
    path = tmp_path / ".entry.lock"
    process = {"namespace": namespace(), "pid": pid, "start": "1"}
    write_lock(
        path, {"pid": pid, "host": here, "since": "2025-01-01T00:00:00+00:00", "process": process}
    )
    lock = LockFile(path, sleep=never_sleeps)
    with caplog.at_level(logging.WARNING):
        lock.acquire_waiting()
    assert json.loads(path.read_text()) == lock.holder and lock.holder["pid"] == os.getpid()
    assert caplog.messages == [
        f"{path} was left by process {pid} on {here}, since 2025-01-01T00:00:00+00:00, "
        "which is gone: taking it over"
    ]
    lock.release()
    assert files(tmp_path) == []


def test_another_host_s_lock_not_refreshed_for_the_stale_interval_is_taken_over(tmp_path, caplog):
    path = tmp_path / ".entry.lock"
    write_lock(path, OTHER_HOST, mtime=time.time() - 1000)
    lock = LockFile(path, stale_after=300, sleep=never_sleeps)
    with caplog.at_level(logging.WARNING):
        lock.acquire_waiting()
    assert lock.holder["host"] == socket.gethostname()
    (message,) = caplog.messages
    assert message.startswith(f"{path} was left by {NAMED}, and not refreshed for 100")
    assert message.endswith(" s: taking it over")
    lock.release()


def test_an_earlier_start_of_a_requeued_slurm_job_is_taken_over_on_any_node(
    tmp_path, caplog, monkeypatch
):
    path = tmp_path / ".lock"
    write_lock(path, {**OTHER_HOST, "slurm_job": "77", "slurm_restart": 0})  # fresh: just now
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")  # the same start: a live holder
    assert LockFile(path).try_acquire()["slurm_job"] == "77"
    monkeypatch.setenv("SLURM_JOB_ID", "78")  # another job
    assert LockFile(path).try_acquire()["host"] == "node-b"
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # the job, requeued
    lock = LockFile(path)
    with caplog.at_level(logging.WARNING):
        assert lock.try_acquire() is None
    assert json.loads(path.read_text()) == lock.holder
    assert lock.holder["slurm_job"] == "77" and lock.holder["slurm_restart"] == 1
    assert caplog.messages == [
        f"{path} was left by {NAMED}, an earlier start of SLURM job 77, requeued since: "
        "taking it over"
    ]
    lock.release()


class OtherHost:
    """A holder on another host, seen by a waiter whose clock runs only as it sleeps.

    It refreshes its lock at each of the waiter's sleeps, until `refreshes` of them; it releases
    the lock at the `releases_at`-th.
    """

    def __init__(self, path, refreshes: int, releases_at: int | None = None):
        self.path, self.refreshes, self.releases_at = path, refreshes, releases_at
        self.now = 1_000_000.0
        self.sleeps: list[float] = []
        write_lock(path, OTHER_HOST, mtime=self.now)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps.append(seconds)
        if len(self.sleeps) <= self.refreshes:
            os.utime(self.path, (self.now, self.now))
        if len(self.sleeps) == self.releases_at:
            self.path.unlink()


def test_a_live_holder_on_another_host_is_waited_for_with_backoff_and_named(tmp_path, caplog):
    path = tmp_path / ".entry.lock"
    other = OtherHost(path, refreshes=40, releases_at=40)  # about 70 s, refreshed throughout
    lock = LockFile(path, stale_after=10, clock=other.clock, sleep=other.sleep)
    with caplog.at_level(logging.INFO):
        lock.acquire_waiting()
    assert lock.holder["pid"] == os.getpid()  # taken once released, not before
    assert len(other.sleeps) == 40
    assert other.sleeps[:7] == [FIRST_POLL * 2**i for i in range(6)] + [MAX_POLL]
    assert set(other.sleeps[6:]) == {MAX_POLL}
    waiting = f"{path}: waiting for {NAMED} to release it"
    assert other.now - 1_000_000 > SAY_EVERY
    assert caplog.messages == [waiting, waiting]  # at first, then after a minute; no take-over
    lock.release()


def test_a_holder_that_stops_refreshing_is_taken_over_after_the_stale_interval(tmp_path, caplog):
    path = tmp_path / ".entry.lock"
    other = OtherHost(path, refreshes=10)  # then its node died
    lock = LockFile(path, stale_after=10, clock=other.clock, sleep=other.sleep)
    with caplog.at_level(logging.WARNING):
        lock.acquire_waiting()
    assert lock.holder["pid"] == os.getpid()
    last_refresh = 1_000_000 + sum(other.sleeps[:10])
    assert 10 < other.now - last_refresh <= 10 + MAX_POLL
    (message,) = caplog.messages
    assert message.startswith(f"{path} was left by {NAMED}, and not refreshed for 1")
    lock.release()


def test_a_held_lock_is_refreshed_by_its_heartbeat(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_file, "HEARTBEAT", 0.001)
    path = tmp_path / ".entry.lock"
    lock = LockFile(path)
    assert lock.try_acquire() is None
    os.utime(path, (1000, 1000))  # as if last refreshed long ago
    deadline = time.monotonic() + 60
    while path.stat().st_mtime == 1000:
        assert time.monotonic() < deadline, "the heartbeat never refreshed the lock"
    lock.release()
    assert files(tmp_path) == []


def test_a_live_holder_is_returned_not_taken_over(tmp_path):
    path = tmp_path / ".entry.lock"
    with_me = LockFile(path)
    assert with_me.try_acquire() is None
    assert LockFile(path).try_acquire() == with_me.holder  # same host, alive, refreshed
    write_lock(path, OTHER_HOST)  # fresh, another host
    assert LockFile(path).try_acquire() == OTHER_HOST
    path.write_text("")  # unreadable and fresh: who holds it cannot be told, so it waits
    assert LockFile(path).try_acquire() == {}


def test_a_dead_pid_of_another_pid_namespace_under_this_hostname_is_not_taken_for_gone(tmp_path):
    # A container with host networking: its hostname is ours, its pids are not.
    path = tmp_path / ".entry.lock"
    process = {"namespace": "another-boot/4026531836", "pid": dead_pid(), "start": "1"}
    holder = {**OTHER_HOST, "host": socket.gethostname(), "process": process}
    write_lock(path, holder)
    assert LockFile(path).try_acquire() == holder
    write_lock(path, {**holder, "process": {}})  # a holder that names no process: the same
    assert LockFile(path).try_acquire() == {**holder, "process": {}}


def test_a_link_that_reports_exists_after_making_the_lock_keeps_the_lock(tmp_path, monkeypatch):
    real_link = os.link

    def retried_link(source, target):  # NFS: the reply to the first try was lost
        real_link(source, target)
        raise FileExistsError(target)

    monkeypatch.setattr(lock_file.os, "link", retried_link)
    path = tmp_path / ".entry.lock"
    lock = LockFile(path, sleep=never_sleeps)
    lock.acquire_waiting()
    assert json.loads(path.read_text()) == lock.holder and lock.holder["pid"] == os.getpid()
    assert LockFile(path).try_acquire() == lock.holder  # held: another is refused
    lock.release()
    assert files(tmp_path) == []


def test_staleness_is_judged_by_the_filesystem_s_clock_not_this_host_s(tmp_path, monkeypatch):
    path = tmp_path / ".entry.lock"
    write_lock(path, OTHER_HOST)  # refreshed just now, as the filesystem stamps it
    monkeypatch.setattr(time, "time", lambda: time.monotonic() + 10_000)  # this host runs ahead
    assert LockFile(path, stale_after=300).try_acquire() == OTHER_HOST
    write_lock(path, OTHER_HOST, mtime=os.stat(path).st_mtime - 301)
    lock = LockFile(path, stale_after=300)
    assert lock.try_acquire() is None
    lock.release()


def test_breaking_a_stale_lock_keeps_one_taken_meanwhile(tmp_path):
    here = socket.gethostname()
    stale = {"pid": 4242, "host": here, "since": "2025-01-01T00:00:00+00:00"}
    # Another process broke the stale lock and took its own after this one read the stale one.
    fresh = {"pid": os.getpid(), "host": here, "since": "2025-01-02T00:00:00+00:00"}
    (tmp_path / ".lock").write_text(json.dumps(fresh))
    LockFile(tmp_path / ".lock")._take_over(stale, "which is gone")
    assert files(tmp_path) == [".lock"]
    assert json.loads((tmp_path / ".lock").read_text()) == fresh


def test_a_lock_refreshed_since_it_was_found_stale_is_put_back(tmp_path):
    path = tmp_path / ".lock"
    write_lock(path, OTHER_HOST)  # refreshed just now, after being read as stale
    LockFile(path, stale_after=300)._take_over(OTHER_HOST, "and not refreshed for 301 s")
    assert files(tmp_path) == [".lock"]
    assert json.loads(path.read_text()) == OTHER_HOST


class FlakyUtime:
    """`os.utime` failing with EIO on the lock file `failures` times, then working again."""

    def __init__(self, path, failures: int) -> None:
        self.path, self.failures, self.calls = str(path), failures, 0
        self.refreshed = threading.Event()  # set at the first refresh after the failures
        self._utime = os.utime

    def __call__(self, path, *args, **kwargs) -> None:
        if str(path) == self.path:
            self.calls += 1
            if self.calls <= self.failures:
                raise OSError(errno.EIO, "Input/output error", self.path)
            self.refreshed.set()
        self._utime(path, *args, **kwargs)


def test_the_heartbeat_survives_failed_refreshes_retrying_with_backoff_and_warning(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(lock_file, "HEARTBEAT", 0.001)
    monkeypatch.setattr(lock_file, "RETRY_FIRST", 0.0001)
    path = tmp_path / ".entry.lock"
    flaky = FlakyUtime(path, failures=3)
    monkeypatch.setattr(lock_file.os, "utime", flaky)
    lock = LockFile(path)
    with caplog.at_level(logging.INFO, logger=lock_file.__name__):
        assert lock.try_acquire() is None
        assert flaky.refreshed.wait(60), "the heartbeat stopped at a failed refresh"
        lock.release()
    failed = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(failed) == 3
    assert all(
        str(path) in r.getMessage() and "Input/output error" in r.getMessage() for r in failed
    )
    assert "retrying in" in failed[0].getMessage()
    assert f"{path}: refreshed again after 3 failed attempt(s)" in caplog.messages
    assert files(tmp_path) == []


def test_the_heartbeat_ends_naming_the_loss_once_another_holder_took_the_lock(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(lock_file, "HEARTBEAT", 0.001)
    path = tmp_path / ".entry.lock"
    lock = LockFile(path)
    with caplog.at_level(logging.ERROR, logger=lock_file.__name__):
        assert lock.try_acquire() is None
        write_lock(path, OTHER_HOST)  # taken over while this process's refreshes failed
        lock._heartbeat.join(timeout=60)
        assert not lock._heartbeat.is_alive()
    (lost,) = caplog.messages
    assert lost.startswith(f"{path} was taken by {NAMED}: this process no longer holds it")
    lock.release()
    assert json.loads(path.read_text()) == OTHER_HOST  # the new holder's lock stays
