"""Checkpoint writing, ours and Lightning's through it: a full disk loses nothing."""

import errno
import io
import re

import pytest
import torch

from helpers.full_disk import fill_disk_after
from transformer_nmt.checkpoint import save_atomically
from transformer_nmt.runtime import atomic
from transformer_nmt.training.run.checkpoint_io import AtomicCheckpointIO


@pytest.mark.parametrize("save", [save_atomically, AtomicCheckpointIO().save_checkpoint])
@pytest.mark.parametrize("fails_at", ["write", "sync"])
def test_a_full_disk_keeps_the_previous_checkpoint_and_names_the_bytes(
    tmp_path, monkeypatch, save, fails_at
):
    path = tmp_path / "last.ckpt"
    save({"step": 1, "w": torch.zeros(10)}, path)
    before = path.read_bytes()
    new = {"step": 2, "w": torch.ones(50_000)}
    buffer = io.BytesIO()
    torch.save(new, buffer)
    needed = len(buffer.getvalue())
    if fails_at == "write":
        written = fill_disk_after(monkeypatch, room=needed // 2)
    else:  # a filesystem that reports a full disk only when the data is flushed (e.g. NFS)

        def full(fd):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError) as info:
        save(new, path)
    assert fails_at == "sync" or 0 < written[0] < needed
    assert info.value.errno == errno.ENOSPC
    assert re.search(
        rf"{re.escape(str(path))}: no space left to write it: it takes {needed:,} bytes and "
        r"[\d,]+ are free in .*the previous last.ckpt, if any, is whole",
        str(info.value),
    )
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]
