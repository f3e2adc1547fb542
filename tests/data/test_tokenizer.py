import json
import multiprocessing
import socket
import subprocess
import sys
import time

import pytest

from transformer_nmt.data import tokenizer as tokenizer_module
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    BPETokenizer,
    cache_path,
    load_or_train,
)
from transformer_nmt.runtime.lock_file import LockFile

TRAIN = [
    "the cat sat on the mat",
    "the dog sat on the log",
    "a cat and a dog",
    "die Katze sitzt auf der Matte",
    "der Hund sitzt auf dem Baumstamm",
] * 20
UNSEEN = [
    "Zürich — 東京 🤖 naïve façade",
    "  leading and trailing spaces  ",
    "tab\tand double  space, newline\nend",
    "literal </s> and <pad> and <s> and <unk> stay text",
    "",
]


@pytest.fixture(scope="module")
def tok() -> BPETokenizer:
    return BPETokenizer.train(TRAIN, vocab_size=300, min_frequency=2)


def test_special_tokens_have_fixed_ids(tok):
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    added = {t["content"]: t["id"] for t in json.loads(tok.to_str())["added_tokens"]}
    assert added == {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}


def test_learns_merges_within_the_vocabulary_bound(tok):
    assert 260 < tok.vocab_size <= 300
    ids = tok.encode_batch(["the cat sat on the mat"])[0]
    assert len(ids) < len("the cat sat on the mat") / 2


def test_a_vocabulary_without_room_for_merges_is_refused():
    with pytest.raises(ValueError, match="vocab_size=260 leaves no room for merges"):
        BPETokenizer.train(TRAIN, vocab_size=260, min_frequency=2)


def test_any_text_round_trips_without_unk_or_special_ids(tok):
    encoded = tok.encode_batch(UNSEEN)
    assert tok.decode_batch(encoded) == UNSEEN
    assert all(i > UNK_ID for ids in encoded for i in ids)


def test_decode_skips_special_tokens(tok):
    ids = tok.encode_batch(["a cat"])[0]
    assert tok.decode_batch([[BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]]) == ["a cat"]


def test_to_str_from_str_is_the_same_tokenizer(tok):
    copy = BPETokenizer.from_str(tok.to_str())
    assert copy.to_str() == tok.to_str()
    assert copy.encode_batch(TRAIN[:5] + UNSEEN) == tok.encode_batch(TRAIN[:5] + UNSEEN)
    # The special-token guard is not serialized; from_str must restore it.
    assert copy.decode_batch(copy.encode_batch(UNSEEN)) == UNSEEN


def test_an_extended_vocabulary_keeps_every_id_and_only_merges_old_segments_further(tok):
    domain = ["the patient received a dose of insulin", "die Patientin erhielt Insulin"] * 20
    extended = tok.extended(BPETokenizer.train(domain, vocab_size=320, min_frequency=2))
    old, tokens = tok.tokens(), extended.tokens()
    assert tokens[: len(old)] == old
    assert "Ġinsulin" in tokens[len(old) :] and "Ġinsulin" not in old
    assert len(set(tokens)) == len(tokens)
    texts = TRAIN[:5] + domain[:2] + UNSEEN
    assert extended.decode_batch(extended.encode_batch(texts)) == texts
    for before, after in zip(tok.encode_batch(texts), extended.encode_batch(texts), strict=True):
        assert boundaries(after, tokens) <= boundaries(before, old)
    shorter = extended.encode_batch(domain[:2])
    assert sum(map(len, shorter)) < sum(map(len, tok.encode_batch(domain[:2])))


def boundaries(ids: list[int], tokens: list[str]) -> set[int]:
    """Where in the byte-level text each token ends."""
    ends, end = set(), 0
    for i in ids:
        end += len(tokens[i])
        ends.add(end)
    return ends


def test_wrong_special_ids_are_refused(tok):
    data = json.loads(tok.to_str())
    data["added_tokens"][0]["content"] = "<PAD>"
    with pytest.raises(ValueError, match="<pad> must have id 0"):
        BPETokenizer.from_str(json.dumps(data))


def test_save_is_atomic_and_load_restores(tok, tmp_path, monkeypatch):
    path = tmp_path / "sub" / "tok.json"
    tok.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["tok.json"]
    assert BPETokenizer.load(path).to_str() == tok.to_str()

    def fail(*args):
        raise OSError("disk full")

    other = BPETokenizer.train(TRAIN[:3], vocab_size=270, min_frequency=1)
    monkeypatch.setattr(tokenizer_module.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        other.save(path)
    # The failed write left neither a temporary file nor a damaged tokenizer.
    assert [p.name for p in path.parent.iterdir()] == ["tok.json"]
    assert BPETokenizer.load(path).to_str() == tok.to_str()


class Counter:
    """A sentences_fn that counts how often the tokenizer was trained."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return iter(TRAIN)


SETTINGS = {"vocab_size": 280, "min_frequency": 2, "fingerprint": "corpus A, train, en-de"}


def test_cache_is_reused_for_the_same_settings(tmp_path):
    counter = Counter()
    first = load_or_train(tmp_path, counter, **SETTINGS)
    second = load_or_train(tmp_path, counter, **SETTINGS)
    assert counter.calls == 1
    assert second.to_str() == first.to_str()
    assert [p.name for p in tmp_path.iterdir()] == [cache_path(tmp_path, **SETTINGS).name]


@pytest.mark.parametrize(
    "change", [{"vocab_size": 290}, {"min_frequency": 3}, {"fingerprint": "corpus B, train, en-de"}]
)
def test_cache_is_not_reused_when_a_setting_changes(tmp_path, change):
    counter = Counter()
    load_or_train(tmp_path, counter, **SETTINGS)
    load_or_train(tmp_path, counter, **{**SETTINGS, **change})
    assert counter.calls == 2
    assert len(list(tmp_path.iterdir())) == 2


def test_cache_is_not_reused_across_format_versions(tmp_path, monkeypatch):
    before = cache_path(tmp_path, **SETTINGS)
    monkeypatch.setattr(tokenizer_module, "FORMAT_VERSION", tokenizer_module.FORMAT_VERSION + 1)
    assert cache_path(tmp_path, **SETTINGS) != before


def test_multi30k_val_round_trips_exactly(multi30k_dir):
    start = time.perf_counter()
    corpus = TextCorpus(str(multi30k_dir))
    train = corpus.read("train", "en", "de")
    tok = BPETokenizer.train((s for pair in train for s in pair), vocab_size=3000, min_frequency=2)
    val = corpus.read("val", "en", "de")
    for side in (0, 1):
        texts = [pair[side] for pair in val]
        assert tok.decode_batch(tok.encode_batch(texts)) == texts
    assert tok.vocab_size == 3000
    assert time.perf_counter() - start < 20


def race_for_the_tokenizer(cache_dir, trainings, first_trains, second_waits, first: bool) -> None:
    """One of two processes loading the same tokenizer; the first is still training when the
    second looks for it (it waits for the second to reach the lock, or to train as well)."""

    def sentences():
        with trainings.get_lock():
            trainings.value += 1
        if first:
            first_trains.set()
            assert second_waits.wait(timeout=60)
        else:
            second_waits.set()
        return iter(TRAIN)

    if not first:
        try_acquire = LockFile.try_acquire

        def signalling_try_acquire(self):
            second_waits.set()
            return try_acquire(self)

        LockFile.try_acquire = signalling_try_acquire
    load_or_train(cache_dir, sentences, **SETTINGS)


def test_processes_racing_on_an_empty_cache_train_once(tmp_path):
    fork = multiprocessing.get_context("fork")
    trainings, first_trains, second_waits = fork.Value("i", 0), fork.Event(), fork.Event()
    args = (tmp_path, trainings, first_trains, second_waits)
    first = fork.Process(target=race_for_the_tokenizer, args=(*args, True))
    first.start()
    assert first_trains.wait(timeout=60)
    second = fork.Process(target=race_for_the_tokenizer, args=(*args, False))
    second.start()
    for process in (first, second):
        process.join(timeout=120)
    assert [first.exitcode, second.exitcode] == [0, 0]
    assert trainings.value == 1
    assert [p.name for p in tmp_path.iterdir()] == [cache_path(tmp_path, **SETTINGS).name]


# Loads the tokenizer of argv[1]'s cache, logging to stderr; trains only after a line on stdin.
LOADS_THE_TOKENIZER = """
import json, logging, sys
from transformer_nmt.data.tokenizer import load_or_train
logging.basicConfig(level=logging.INFO, format="%(message)s")

def sentences():
    print("training", flush=True)
    sys.stdin.readline()
    return iter(json.loads(sys.argv[2]))

load_or_train(sys.argv[1], sentences, **json.loads(sys.argv[3]))
"""


@pytest.mark.slow
def test_a_second_process_waits_naming_the_builder_then_reads_its_cache(tmp_path):
    def start():
        return subprocess.Popen(
            [sys.executable, "-c", LOADS_THE_TOKENIZER, str(tmp_path), *map(json.dumps, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    args = (TRAIN, SETTINGS)
    builder = start()
    assert builder.stdout.readline() == "training\n"  # it holds the lock
    waiter = start()
    waiting = f"waiting for process {builder.pid} on {socket.gethostname()}"
    seen = []
    while waiting not in (line := waiter.stderr.readline()):
        assert line, f"the waiter ended without waiting: {seen}"
        seen.append(line)
    builder.stdin.write("\n")
    builder.stdin.close()
    assert builder.wait(timeout=120) == 0
    out, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    assert out == ""  # it never asked for sentences: it did not train
    assert f"Tokenizer: reusing {cache_path(tmp_path, **SETTINGS)}" in err
    assert [p.name for p in tmp_path.iterdir()] == [cache_path(tmp_path, **SETTINGS).name]
