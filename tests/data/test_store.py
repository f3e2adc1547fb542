"""The token store: encoded once, equal to in-memory encoding, never used when partial."""

import logging
import os
import pickle
import signal
import subprocess
import sys

import numpy as np
import pytest

from transformer_nmt.data import dataset, store
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.dataset import encode_pairs
from transformer_nmt.data.store import open_or_build, store_path
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.data.toy import ToyCorpus

PAIRS = ToyCorpus(num_train=300, num_val=10, num_test=10).read("train", "en", "de")
MAX_LEN = 8  # drops the longer toy pairs


@pytest.fixture(scope="module")
def tok() -> BPETokenizer:
    return BPETokenizer.train([s for pair in PAIRS for s in pair], 400, 1)


class Reads:
    """`pairs_fn` that counts its calls."""

    def __init__(self, pairs):
        self.pairs, self.calls = pairs, 0

    def __call__(self):
        self.calls += 1
        return self.pairs


def path_for(tmp_path, tok, max_len=MAX_LEN, split="val"):
    return store_path(tmp_path / "cache", split, "toy en-de", tok, max_len)


def assert_same(stored, expected):
    """Token for token, and the text, as encode_pairs gives them."""
    for side in ("src", "tgt"):
        np.testing.assert_array_equal(getattr(stored, side).values, getattr(expected, side).values)
        np.testing.assert_array_equal(
            getattr(stored, side).offsets, getattr(expected, side).offsets
        )
    assert stored.src_text == expected.src_text
    assert stored.tgt_text == expected.tgt_text
    assert [stored[i] for i in range(len(stored))] == [expected[i] for i in range(len(expected))]


@pytest.mark.parametrize("keep_text", [True, False])
def test_store_equals_in_memory_encoding_and_is_memory_mapped(
    tmp_path, tok, monkeypatch, keep_text
):
    monkeypatch.setattr(dataset, "ENCODE_CHUNK", 64)  # several chunks, offsets carried across
    expected, dropped = encode_pairs(PAIRS, tok, MAX_LEN, keep_text)
    assert 0 < dropped < len(PAIRS)
    stored, stored_dropped = open_or_build(
        path_for(tmp_path, tok), Reads(PAIRS), tok, MAX_LEN, keep_text
    )
    assert stored_dropped == dropped
    assert_same(stored, expected)
    assert isinstance(stored.src.values, np.memmap)
    assert isinstance(stored.tgt.offsets, np.memmap)


def test_multi30k_store_equals_in_memory_encoding(tmp_path, multi30k_dir):
    pairs = TextCorpus(str(multi30k_dir)).read("val", "de", "en")
    tok = BPETokenizer.train([s for pair in pairs for s in pair], 2000, 2)
    expected, dropped = encode_pairs(pairs, tok, 64, keep_text=True)
    stored, stored_dropped = open_or_build(path_for(tmp_path, tok, 64), Reads(pairs), tok, 64, True)
    assert stored_dropped == dropped
    assert_same(stored, expected)


def test_a_store_is_reused_without_reading_the_corpus(tmp_path, tok, caplog):
    reads = Reads(PAIRS)
    path = path_for(tmp_path, tok)
    first, _ = open_or_build(path, reads, tok, MAX_LEN, True)
    with caplog.at_level(logging.INFO):
        second, _ = open_or_build(path, reads, tok, MAX_LEN, True)
    assert reads.calls == 1
    assert_same(second, first)
    assert f"Token store: reusing {path} (" in caplog.text
    assert "bytes a token" in caplog.text


def test_a_changed_max_len_tokenizer_split_or_corpus_makes_a_new_store(tmp_path, tok):
    other_tok = BPETokenizer.train([s for pair in PAIRS for s in pair], 300, 1)
    paths = {
        path_for(tmp_path, tok),
        path_for(tmp_path, tok, max_len=MAX_LEN + 1),
        path_for(tmp_path, other_tok),
        path_for(tmp_path, tok, split="test"),
        store_path(tmp_path / "cache", "val", "toy de-en", tok, MAX_LEN),
    }
    assert len(paths) == 5
    assert path_for(tmp_path, BPETokenizer.from_str(tok.to_str())) == path_for(tmp_path, tok)
    reads = Reads(PAIRS)
    open_or_build(path_for(tmp_path, tok), reads, tok, MAX_LEN, True)
    short, _ = open_or_build(path_for(tmp_path, tok, max_len=5), reads, tok, 5, True)
    assert reads.calls == 2
    assert max(short.src.lengths().max(), short.tgt.lengths().max()) <= 5


def test_an_error_while_encoding_leaves_no_store_and_the_next_start_builds_it(
    tmp_path, tok, monkeypatch
):
    monkeypatch.setattr(dataset, "ENCODE_CHUNK", 64)
    calls = 0
    encode = BPETokenizer.encode_batch

    def fails_on_the_third_chunk(self, texts, side="source"):
        nonlocal calls
        calls += 1
        if calls == 5:  # two calls a chunk: the third chunk's sources
            raise KeyboardInterrupt
        return encode(self, texts, side)

    monkeypatch.setattr(BPETokenizer, "encode_batch", fails_on_the_third_chunk)
    path = path_for(tmp_path, tok)
    with pytest.raises(KeyboardInterrupt):
        open_or_build(path, Reads(PAIRS), tok, MAX_LEN, True)
    # No store, no temporary folder, no lock: the cache folder, left empty, is gone too.
    assert not path.parent.exists()
    monkeypatch.setattr(BPETokenizer, "encode_batch", encode)
    stored, _ = open_or_build(path, Reads(PAIRS), tok, MAX_LEN, True)
    assert_same(stored, encode_pairs(PAIRS, tok, MAX_LEN, True)[0])


KILLED_WHILE_ENCODING = """
import os, signal, sys
from transformer_nmt.data import dataset, store
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.data.toy import ToyCorpus
pairs = ToyCorpus(num_train=300, num_val=10, num_test=10).read("train", "en", "de")
tok = BPETokenizer.from_str(sys.argv[2])
dataset.ENCODE_CHUNK = 64
encode, calls = BPETokenizer.encode_batch, []
def killed_on_the_third_chunk(self, texts, side="source"):
    calls.append(1)
    if len(calls) == 5:
        os.kill(os.getpid(), signal.SIGKILL)
    return encode(self, texts, side)
BPETokenizer.encode_batch = killed_on_the_third_chunk
store.open_or_build(store.Path(sys.argv[1]), lambda: pairs, tok, 8, True)
"""


@pytest.mark.slow
def test_a_kill_while_encoding_leaves_no_store_that_is_used_afterwards(tmp_path, tok):
    path = path_for(tmp_path, tok)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_ENCODING, str(path), tok.to_str()], env=os.environ
    )
    assert killed.returncode == -signal.SIGKILL
    assert not path.exists()
    (leftover,) = path.parent.glob(".tokens-val-*.tmp")  # the half-written files, unused
    assert (leftover / "src.values").exists() and not (leftover / "manifest.json").exists()
    stored, _ = open_or_build(path, Reads(PAIRS), tok, MAX_LEN, True)
    assert_same(stored, encode_pairs(PAIRS, tok, MAX_LEN, True)[0])
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # the leftover is gone


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: (path / "manifest.json").unlink(),
        lambda path: (path / "manifest.json").write_text("{"),
        lambda path: os.truncate(path / "tgt.values", 8),
        lambda path: os.truncate(path / "src.offsets", 0),
        lambda path: (path / "text.jsonl").unlink(),
    ],
    ids=["no manifest", "torn manifest", "short values", "empty offsets", "no text"],
)
def test_a_damaged_store_is_logged_and_rebuilt_never_used(tmp_path, tok, caplog, damage):
    path = path_for(tmp_path, tok)
    reads = Reads(PAIRS)
    expected, _ = open_or_build(path, reads, tok, MAX_LEN, True)
    expected = encode_pairs(PAIRS, tok, MAX_LEN, True)[0]
    damage(path)
    with caplog.at_level(logging.WARNING):
        stored, _ = open_or_build(path, reads, tok, MAX_LEN, True)
    assert reads.calls == 2
    assert f"Token store {path} is damaged" in caplog.text
    assert_same(stored, expected)
    (aside,) = path.parent.glob(f".{path.name}.*.damaged")  # set aside: another node may map it
    assert f"set aside as {aside}" in caplog.text


def test_a_store_that_fails_to_read_once_is_read_again_not_rebuilt(tmp_path, tok, monkeypatch):
    path = path_for(tmp_path, tok)
    reads = Reads(PAIRS)
    open_or_build(path, reads, tok, MAX_LEN, True)
    real_read, failures = store._read, []

    def flaky_read(folder):  # a shared filesystem's passing error, once
        if not failures:
            failures.append(folder)
            raise OSError(5, "Input/output error")
        return real_read(folder)

    monkeypatch.setattr(store, "_read", flaky_read)
    stored, _ = open_or_build(path, reads, tok, MAX_LEN, True)
    assert failures == [path] and reads.calls == 1  # reused, not built again
    assert_same(stored, encode_pairs(PAIRS, tok, MAX_LEN, True)[0])
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_store_of_another_format_version_is_rebuilt(tmp_path, tok, monkeypatch):
    reads = Reads(PAIRS)
    path = path_for(tmp_path, tok)
    open_or_build(path, reads, tok, MAX_LEN, True)
    monkeypatch.setattr(store, "STORE_VERSION", store.STORE_VERSION + 1)
    open_or_build(path, reads, tok, MAX_LEN, True)
    assert reads.calls == 2


def test_workers_receive_the_store_as_a_mapping_not_a_copy(tmp_path, tok):
    """What a spawn or forkserver DataLoader worker unpickles: the same files, mapped again."""
    stored, _ = open_or_build(path_for(tmp_path, tok), Reads(PAIRS), tok, MAX_LEN, True)
    pickled = pickle.dumps(stored.src)
    assert len(pickled) < 1000 < stored.src.values.nbytes + stored.src.offsets.nbytes
    unpickled = pickle.loads(pickled)
    assert isinstance(unpickled.values, np.memmap)
    assert unpickled.values.filename == stored.src.values.filename
    np.testing.assert_array_equal(unpickled.values, stored.src.values)
    np.testing.assert_array_equal(unpickled.offsets, stored.src.offsets)
