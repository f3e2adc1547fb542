"""A disk that fills up: files opened by `runtime.atomic` fail with ENOSPC mid-write."""

import builtins
import errno

import pytest

from transformer_nmt.runtime import atomic


class _FillingFile:
    """A real file whose writes fail with ENOSPC once `room` bytes are in it."""

    def __init__(self, file, room: int, written: list[int]) -> None:
        self._file = file
        self._room = room
        self._written = written  # bytes that reached the file, for the test to check

    def write(self, data: bytes) -> int:
        fits = max(0, min(len(data), self._room - self._written[0]))
        self._file.write(data[:fits])
        self._written[0] += fits
        if fits < len(data):
            raise OSError(errno.ENOSPC, "No space left on device")
        return fits

    def __enter__(self) -> "_FillingFile":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._file.close()

    def __getattr__(self, name: str):
        return getattr(self._file, name)  # flush, fileno


def fill_disk_after(monkeypatch: pytest.MonkeyPatch, room: int) -> list[int]:
    """Make atomic writes fail once `room` bytes are written; returns [bytes written so far]."""
    written = [0]

    def opens_a_filling_file(path, mode, **kwargs):
        return _FillingFile(builtins.open(path, mode, **kwargs), room, written)

    # A module global shadows the builtin for atomic.py alone.
    monkeypatch.setattr(atomic, "open", opens_a_filling_file, raising=False)
    return written
