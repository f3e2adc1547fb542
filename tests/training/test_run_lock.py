"""Two runs writing one run folder: the second is refused, naming the first."""

import json
import logging
import os
import signal
import socket
import subprocess
import sys

import pytest

from transformer_nmt.training.run.run_lock import RunLock, RunLockedError, is_global_rank_zero

HOLDS_THE_LOCK = """
import sys
from transformer_nmt.training.run.run_lock import RunLock

with RunLock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_lock_names_its_holder_and_goes_when_released(tmp_path):
    with RunLock(tmp_path / "run") as lock:
        holder = json.loads(lock.path.read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        assert files(tmp_path / "run") == [".lock"]
    assert files(tmp_path / "run") == []
    with pytest.raises(ValueError), RunLock(tmp_path / "run"):
        raise ValueError("the run failed")
    assert files(tmp_path / "run") == []  # released on an error too


def test_a_second_holder_in_the_same_process_is_refused(tmp_path):
    with RunLock(tmp_path) as first:
        with pytest.raises(RunLockedError) as info, RunLock(tmp_path):
            pass
        assert f"in use by another run: process {os.getpid()} on {socket.gethostname()}" in str(
            info.value
        )
        assert first.path.exists()  # the refused one removed nothing
    assert files(tmp_path) == []


def test_a_disabled_lock_writes_nothing(tmp_path):
    with RunLock(tmp_path, enabled=True), RunLock(tmp_path, enabled=False):
        pass  # a rank other than zero beside rank zero's lock
    assert files(tmp_path) == []


def test_a_lock_of_another_host_is_refused_with_how_to_clear_it(tmp_path):
    holder = {"pid": 1, "host": "node-that-crashed", "since": "2025-01-01T00:00:00+00:00"}
    (tmp_path / ".lock").write_text(json.dumps(holder))
    with pytest.raises(RunLockedError) as info, RunLock(tmp_path):
        pass
    message = str(info.value)
    assert "process 1 on node-that-crashed, since 2025-01-01T00:00:00+00:00" in message
    assert f"if it is gone (its machine crashed), delete {tmp_path / '.lock'}" in message
    assert json.loads((tmp_path / ".lock").read_text()) == holder


def test_an_unreadable_lock_is_refused(tmp_path):
    (tmp_path / ".lock").write_text("")  # e.g. a machine crashed before the data reached disk
    with pytest.raises(RunLockedError, match="which is unreadable: if no run writes"):
        RunLock(tmp_path).acquire()


@pytest.mark.parametrize(
    ("environ", "zero"),
    [
        ({}, True),
        ({"RANK": "0", "LOCAL_RANK": "0"}, True),  # torchrun
        ({"RANK": "3", "LOCAL_RANK": "1"}, False),
        ({"LOCAL_RANK": "1"}, False),  # started by Lightning's launcher
        ({"NODE_RANK": "1"}, False),  # the first process of a second node
        ({"SLURM_PROCID": "0"}, True),
        ({"SLURM_PROCID": "5"}, False),
    ],
)
def test_global_rank_zero_from_the_launchers_variables(environ, zero):
    assert is_global_rank_zero(environ) == zero


def start_holder(run_dir) -> subprocess.Popen:
    """A process holding the lock of run_dir until its stdin closes."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDS_THE_LOCK, str(run_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline() == "held\n"
    return holder


@pytest.mark.slow
def test_a_second_process_is_refused_until_the_first_ends(tmp_path):
    holder = start_holder(tmp_path)
    with pytest.raises(RunLockedError, match=f"process {holder.pid} on {socket.gethostname()}"):
        RunLock(tmp_path).acquire()
    holder.stdin.close()
    assert holder.wait(timeout=60) == 0
    assert files(tmp_path) == []
    with RunLock(tmp_path):
        pass


@pytest.mark.slow
def test_the_lock_of_a_killed_process_is_taken_over_with_a_warning(tmp_path, caplog):
    holder = start_holder(tmp_path)
    holder.kill()
    assert holder.wait(timeout=60) == -signal.SIGKILL
    with caplog.at_level(logging.WARNING), RunLock(tmp_path) as lock:
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    assert f"left by process {holder.pid} on {socket.gethostname()}" in caplog.text
    assert "which is gone: taking it over" in caplog.text
    assert files(tmp_path) == []


@pytest.mark.slow
def test_a_second_process_exits_with_the_message(tmp_path):
    with RunLock(tmp_path):
        second = subprocess.run(
            [sys.executable, "-c", HOLDS_THE_LOCK, str(tmp_path)],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert second.returncode == 1 and second.stdout == ""
    assert f"RunLockedError: {tmp_path} is in use by another run: process {os.getpid()}" in (
        second.stderr
    )
