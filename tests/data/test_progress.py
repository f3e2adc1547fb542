"""Progress people can see: bars for reading, BPE training and encoding; the cache named."""

import io
import logging
import os
import pty
import subprocess
import sys

import pytest

from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.progress import size_text


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
