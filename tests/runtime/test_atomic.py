"""Atomic writes keep the previous file whole, and every file a user keeps goes through them."""

import errno
import fcntl
import json
import re

import pytest
import torch

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from helpers.full_disk import fill_disk_after
from transformer_nmt.cli.average import main as average_main
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.data.store import open_or_build, store_path
from transformer_nmt.data.tokenizer import BPETokenizer, cache_path, load_or_train
from transformer_nmt.runtime import atomic
from transformer_nmt.runtime.atomic import (
    atomic_folder,
    atomic_open,
    exclusive,
    is_disk_full,
    write_atomically,
)


def files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_write_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path):
    path = tmp_path / "sub" / "report.json"
    write_atomically(path, "première\n")
    write_atomically(path, b"second\n")
    assert path.read_bytes() == b"second\n"
    assert files(path.parent) == ["report.json"]
    write_atomically(path, "première\n")
    assert path.read_text(encoding="utf-8") == "première\n"


def test_an_error_mid_write_leaves_the_previous_file_whole(tmp_path):
    path = tmp_path / "hypotheses.txt"
    write_atomically(path, "old\n")
    with pytest.raises(ValueError, match="serialisation failed"), atomic_open(path, "w") as f:
        f.write("half of the new")
        f.flush()
        raise ValueError("serialisation failed")
    assert path.read_text() == "old\n"
    assert files(tmp_path) == ["hypotheses.txt"]


def test_a_full_disk_names_the_file_and_the_bytes_it_takes(tmp_path, monkeypatch):
    path = tmp_path / "report.json"
    write_atomically(path, "old\n")
    data = "x" * 10_000
    written = fill_disk_after(monkeypatch, room=4_000)
    with pytest.raises(OSError) as info:
        write_atomically(path, data)
    assert written == [4_000]  # the disk filled up mid-write
    assert info.value.errno == errno.ENOSPC
    assert re.search(
        rf"{re.escape(str(path))}: no space left to write it: it takes 10,000 bytes and "
        rf"[\d,]+ are free in {re.escape(str(tmp_path))}",
        str(info.value),
    )
    assert path.read_text() == "old\n" and files(tmp_path) == ["report.json"]


def test_a_folder_appears_whole_or_not_at_all(tmp_path):
    store = tmp_path / "cache" / "store"
    with pytest.raises(KeyboardInterrupt), atomic_folder(store) as tmp:
        (tmp / "half.bin").write_bytes(b"12")
        raise KeyboardInterrupt
    assert files(tmp_path / "cache") == []
    leftover = tmp_path / "cache" / ".store.killed.tmp"  # as a process killed mid-write leaves
    leftover.mkdir()
    with atomic_folder(store) as tmp:
        (tmp / "whole.bin").write_bytes(b"1234")
        assert not store.exists()
    assert files(tmp_path / "cache") == ["store"] and files(store) == ["whole.bin"]


def test_the_cache_lock_leaves_no_file_and_no_empty_folder(tmp_path):
    lock = tmp_path / "cache" / ".entry.lock"
    with exclusive(lock):
        assert lock.exists()
    assert not (tmp_path / "cache").exists()  # nothing was cached: the folder goes too
    with exclusive(lock):
        (tmp_path / "cache" / "entry").write_text("built")
    assert files(tmp_path / "cache") == ["entry"]


def test_the_caches_build_where_flock_is_refused(tmp_path, monkeypatch):
    def refused(*args):
        raise OSError(errno.ENOSYS, "Function not implemented")  # Lustre mounted without flock

    monkeypatch.setattr(fcntl, "flock", refused)
    monkeypatch.setattr(fcntl, "lockf", refused)
    cache = tmp_path / "cache"
    tokenizer = load_or_train(cache, lambda: SENTENCES, 270, 1, "sentences")
    pairs = list(zip(SENTENCES[::2], SENTENCES[1::2], strict=True))
    store = store_path(cache, "val", "sentences", tokenizer, 16)
    dataset, dropped = open_or_build(store, lambda: pairs, tokenizer, 16, keep_text=True)
    assert (len(dataset), dropped) == (len(pairs), 0)
    assert files(cache) == sorted([cache_path(cache, 270, 1, "sentences").name, store.name])


def test_a_full_disk_is_seen_through_the_errors_it_caused():
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos") from None
    except RuntimeError as e:
        wrapped = e  # as torch.save raises its file's error: the OSError is only the context
    assert is_disk_full(wrapped)
    assert not is_disk_full(RuntimeError("other")) and not is_disk_full(PermissionError(13, "x"))


def test_the_tokenizer_cache_is_synced_and_kept_whole_on_a_full_disk(tmp_path, monkeypatch):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=270, min_frequency=1)
    synced = []
    monkeypatch.setattr(atomic.os, "fsync", synced.append)
    tokenizer.save(tmp_path / "bpe.json")
    assert len(synced) == 2  # the file, then the folder holding its new name
    other = BPETokenizer.train(SENTENCES[:2], vocab_size=265, min_frequency=1)
    fill_disk_after(monkeypatch, room=100)
    with pytest.raises(OSError, match="bpe.json: no space left"):
        other.save(tmp_path / "bpe.json")
    assert BPETokenizer.load(tmp_path / "bpe.json").to_str() == tokenizer.to_str()
    assert files(tmp_path) == ["bpe.json"]


@pytest.fixture
def checkpoints(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=300, min_frequency=1)
    return [write_checkpoint(tmp_path / f"{i}.ckpt", tokenizer, seed=i) for i in range(2)]


def test_average_keeps_the_previous_output_when_saving_fails(checkpoints, tmp_path, monkeypatch):
    output = tmp_path / "avg.ckpt"
    average_main([*map(str, checkpoints), "--output", str(output)])
    before = output.read_bytes()
    real_save = torch.save

    def fails_half_way(obj, f):
        real_save({"part": torch.zeros(1000)}, f)
        raise RuntimeError("serialisation failed")

    monkeypatch.setattr(torch, "save", fails_half_way)
    with pytest.raises(RuntimeError, match="serialisation failed"):
        average_main([*map(str, checkpoints[::-1]), "--output", str(output)])
    assert output.read_bytes() == before
    monkeypatch.undo()
    fill_disk_after(monkeypatch, room=1000)
    with pytest.raises(SystemExit, match=r"error: .*avg.ckpt: no space left to write it: it takes"):
        average_main([*map(str, checkpoints[::-1]), "--output", str(output)])
    assert output.read_bytes() == before
    assert files(tmp_path) == ["0.ckpt", "1.ckpt", "avg.ckpt"]


def test_evaluate_keeps_its_previous_outputs_on_a_full_disk(checkpoints, tmp_path, monkeypatch):
    (tmp_path / "src.txt").write_text("one two\nfour\n")
    (tmp_path / "ref.txt").write_text("zwei drei\nfünf\n")
    out = tmp_path / "eval"
    args = [str(checkpoints[0]), "--src", str(tmp_path / "src.txt"), "--ref"]
    args += [str(tmp_path / "ref.txt"), "--output-dir", str(out), "--beam-size", "1"]
    args += ["--max-len-b", "2"]
    evaluate_main(args)
    assert json.loads((out / "report.json").read_text())["sentences"] == 2
    before = {name: (out / name).read_bytes() for name in files(out)}
    fill_disk_after(monkeypatch, room=0)
    with pytest.raises(SystemExit, match=r"error: .*hypotheses.txt: no space left to write it"):
        evaluate_main(args)
    assert {name: (out / name).read_bytes() for name in files(out)} == before
