"""Progress people can see: bars on a terminal, log lines elsewhere; the cache named."""

import io
import logging
import os
import pty
import subprocess
import sys
import threading

import pytest

from transformer_nmt.data import progress as progress_module
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.progress import LOG_EVERY, LoggedProgress, size_text


class Terminal(io.StringIO):
    """A stderr that says it is a terminal, as tqdm asks."""

    def isatty(self) -> bool:
        return True


def datamodule(tmp_path) -> TranslationDataModule:
    """300 pairs a split, in text files written on the first call."""
    for split in ("train", "val", "test"):
        for lang, words in (("en", "one two"), ("de", "eins zwei")):
            file = tmp_path / f"{split}.{lang}"
            if not file.exists():  # rewriting would change the corpus fingerprint
                file.write_text("".join(f"{words} {i}\n" for i in range(300)))
    corpus = TextCorpus(str(tmp_path))
    return TranslationDataModule(
        corpus, "en", "de", vocab_size=300, max_tokens=64, max_len=16, cache_dir=str(tmp_path / "c")
    )


def test_reading_and_encoding_show_counts_and_rates_on_a_terminal(tmp_path, monkeypatch):
    dm = datamodule(tmp_path)
    dm.load_tokenizer()
    monkeypatch.setattr(sys, "stderr", Terminal())
    dm.setup("validate")
    shown = sys.stderr.getvalue()
    assert "reading " in shown and "val.en" in shown
    assert "encoding tokens-val-" in shown
    for bar in ("reading", "encoding tokens-val-"):
        final = [line for line in shown.split("\r") if bar in line][-1]
        # Files are streamed, so the count has no total (a Hub table's has): count and rate.
        assert ": 300 pairs [" in final
        assert " pairs/s" in final


def test_no_bars_where_stderr_is_no_terminal(tmp_path, capsys):
    datamodule(tmp_path).setup("validate")
    assert capsys.readouterr().err == ""


def test_the_tokenizer_cache_is_named_with_its_size_and_a_hit_says_reused(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        datamodule(tmp_path).load_tokenizer()
        datamodule(tmp_path).load_tokenizer()
    cached = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Tokenizer:")]
    (path,) = (tmp_path / "c").iterdir()
    size = size_text(path.stat().st_size)
    assert cached == [
        f"Tokenizer: cached at {path} ({size})",
        f"Tokenizer: reusing {path} ({size})",
    ]


@pytest.mark.parametrize("nbytes, text", [(999, "999 B"), (1234, "1.2 kB"), (5_600_000, "5.6 MB")])
def test_sizes_read_as_people_write_them(nbytes, text):
    assert size_text(nbytes) == text


# A list: sized, so the bar knows the total.
BPE_TRAINING = """
from transformer_nmt.data.tokenizer import BPETokenizer
BPETokenizer.train([f"hello {i}" for i in range(6000)], 300, 1)
"""


def run_on_a_terminal(code: str) -> str:
    parent, child = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", code], stdout=child, stderr=child)
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:  # the child has exited and closed the terminal
            break
        if not chunk:
            break
        out += chunk
    assert process.wait() == 0
    os.close(parent)
    return out.decode()


@pytest.mark.slow
def test_bpe_training_shows_its_progress_out_of_all_sentences_on_a_terminal_only():
    shown = run_on_a_terminal(BPE_TRAINING)
    assert "Pre-processing sequences" in shown
    assert "/     6000" in shown  # out of every sentence: the length reached the trainer
    piped = subprocess.run([sys.executable, "-c", BPE_TRAINING], capture_output=True, text=True)
    assert piped.returncode == 0
    assert piped.stderr == piped.stdout == ""


class FakeClock:
    """Seconds that pass only when a test says so, or by `step` at every reading."""

    def __init__(self, step: float = 0.0):
        self.now, self.step = 1000.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == progress_module.__name__]


def test_off_a_terminal_a_line_comes_every_30_seconds_and_none_between(caplog):
    clock = FakeClock()
    with caplog.at_level(logging.INFO):
        bar = LoggedProgress(desc="encoding x", total=1000, unit=" pairs", clock=clock)
        logged_at = []  # the seconds at which an update logged a line
        for second in range(1, 100):  # 10 pairs a second for 99 s
            before = len(lines(caplog))
            clock.now += 1
            bar.update(10)
            if len(lines(caplog)) > before:
                logged_at.append(second)
        bar.close()
    assert LOG_EVERY == 30
    assert logged_at == [30, 60, 90]
    assert lines(caplog) == [
        "encoding x: started of 1,000 pairs",
        "encoding x: 300/1,000 pairs (30%), 10 pairs/s, 00:30 elapsed, 01:10 left",
        "encoding x: 600/1,000 pairs (60%), 10 pairs/s, 01:00 elapsed, 00:40 left",
        "encoding x: 900/1,000 pairs (90%), 10 pairs/s, 01:30 elapsed, 00:10 left",
        "encoding x: done, 990 pairs in 01:39, 10 pairs/s",
    ]


def test_a_burst_after_a_long_wait_estimates_no_time_left_from_its_first_item(caplog):
    clock = FakeClock()
    with caplog.at_level(logging.INFO):  # a translation's sorted chunk: minutes, then 4,096 at once
        bar = LoggedProgress(desc="Stage distill", total=29_000, unit=" sentences", clock=clock)
        clock.now += 1500
        bar.update(1)
        clock.now += 100
        bar.update(4095)
    assert lines(caplog)[1:] == [
        "Stage distill: 1/29,000 sentences (0%), 0 sentences/s, 25:00 elapsed",
        "Stage distill: 4,096/29,000 sentences (14%), 3 sentences/s, 26:40 elapsed, 2:42:08 left",
    ]


def test_a_stream_of_unknown_length_logs_its_count_and_rate(caplog):
    clock = FakeClock()
    with caplog.at_level(logging.INFO):
        bar = LoggedProgress(iter(range(90)), desc="reading f", unit=" pairs", clock=clock)
        for _ in bar:
            clock.now += 1
        assert bar.closed  # it ends with its iterable, as a tqdm bar does
    assert lines(caplog) == [
        "reading f: started",
        "reading f: 30 pairs, 1 pairs/s, 00:30 elapsed",
        "reading f: 60 pairs, 1 pairs/s, 01:00 elapsed",
        "reading f: 90 pairs, 1 pairs/s, 01:30 elapsed",
        "reading f: done, 90 pairs in 01:30, 1 pairs/s",
    ]


def test_a_pass_that_counts_nothing_is_still_logged_from_its_heartbeat(caplog, monkeypatch):
    monkeypatch.setattr(progress_module, "HEARTBEAT_POLL", 0.001)
    clock = FakeClock(step=LOG_EVERY)  # every look at the clock finds 30 s more
    beats = threading.Event()

    class Beats(logging.Handler):
        def emit(self, record):
            if "read, " in record.getMessage():
                beats.set()

    handler = Beats()
    progress_module.log.addHandler(handler)
    try:
        with caplog.at_level(logging.INFO):
            with LoggedProgress(desc="BPE training", unit=" sentences", clock=clock) as bar:
                assert list(bar.count(["a", "b"])) == ["a", "b"]
                # Blocked, as the trainer is while it merges: only the thread can log.
                assert beats.wait(timeout=60)
    finally:
        progress_module.log.removeHandler(handler)
    logged = lines(caplog)
    assert logged[0] == "BPE training: started"
    assert any(line.startswith("BPE training: all 2 sentences read, ") for line in logged)
    assert logged[-1].startswith("BPE training: done, 2 sentences in ")


def test_a_failed_pass_is_not_logged_as_done(caplog):
    with caplog.at_level(logging.INFO), pytest.raises(KeyboardInterrupt):
        with LoggedProgress(desc="encoding x", clock=FakeClock()):
            raise KeyboardInterrupt
    assert lines(caplog) == ["encoding x: started"]


# Stderr is a pipe, as under SLURM or nohup.
PREPARED_OFF_A_TERMINAL = """
import logging, sys
from pathlib import Path
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.datamodule import TranslationDataModule
logging.basicConfig(level=logging.INFO, format="%(message)s")
corpus = TextCorpus(sys.argv[1])
TranslationDataModule(
    corpus, "en", "de", vocab_size=300, max_tokens=64, max_len=16, cache_dir=sys.argv[1] + "/c"
).setup("validate")
"""


@pytest.mark.slow
def test_off_a_terminal_bpe_training_and_encoding_log_their_start_and_end(tmp_path):
    datamodule(tmp_path)  # writes the corpus
    run = subprocess.run(
        [sys.executable, "-c", PREPARED_OFF_A_TERMINAL, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    logged = run.stderr.splitlines()
    for start, end in [
        ("BPE training: started", "BPE training: done, "),
        (f"reading {tmp_path / 'val.en'} and", f"reading {tmp_path / 'val.en'} and"),
        ("encoding tokens-val-", "encoding tokens-val-"),
    ]:
        assert any(line.startswith(start) and "started" in line for line in logged), start
        assert any(line.startswith(end) and ": done, " in line for line in logged), end
    assert "\r" not in run.stderr  # no bar
