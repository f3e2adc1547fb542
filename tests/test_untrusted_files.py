"""Damaged checkpoints and messy input to nmt-translate: a clear message or a translation."""

import io
import logging
import re
import sys
from pathlib import Path

import pytest
import torch

from transformer_nmt.checkpoint import (
    KIND_KEY,
    PERIODIC,
    CheckpointError,
    last_checkpoints,
    read_checkpoint,
)
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer

WORDS = ["one two three", "four five six", "seven eight nine", "ten eleven twelve"] * 5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """An untrained tiny translator whose position table holds 16 tokens."""
    tokenizer = BPETokenizer.train(WORDS, vocab_size=280, min_frequency=1)
    torch.manual_seed(0)
    model = Transformer(
        tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2, max_positions=16
    )
    path = tmp_path_factory.mktemp("ckpt") / "tiny.ckpt"
    torch.save(
        {
            "global_step": 3,
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "model_config": model.config.to_dict(),
            "tokenizer": tokenizer.to_str(),
        },
        path,
    )
    return path


def damaged(path: Path, how: str) -> Path:
    data = path.read_bytes()
    out = path.parent / f"{how}.ckpt"
    out.write_bytes(
        {"truncated": data[: len(data) // 2], "garbage": b"\x00junk" * 10, "empty": b""}[how]
    )
    return out


@pytest.mark.parametrize("how", ["truncated", "garbage", "empty"])
def test_a_damaged_checkpoint_gets_a_clear_error(checkpoint, how):
    path = damaged(checkpoint, how)
    with pytest.raises(CheckpointError, match=f"{path}: unreadable, the file is truncated or"):
        read_checkpoint(path)


def test_a_missing_checkpoint_or_one_of_other_data_is_named(checkpoint, tmp_path):
    with pytest.raises(CheckpointError, match="nowhere.ckpt: no such checkpoint file"):
        read_checkpoint(tmp_path / "nowhere.ckpt")
    torch.save([1, 2], tmp_path / "list.ckpt")
    with pytest.raises(CheckpointError, match="holds a list, not a checkpoint"):
        read_checkpoint(tmp_path / "list.ckpt")


def test_a_folder_given_as_checkpoint_says_so_and_lists_its_checkpoints(checkpoint, tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    with pytest.raises(CheckpointError, match="is a folder, not a checkpoint file, and holds no"):
        read_checkpoint(folder)
    for name in ("last.ckpt", "step10.ckpt"):
        (folder / name).write_bytes(checkpoint.read_bytes())
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(folder)
    assert str(info.value) == (
        f"{folder} is a folder, not a checkpoint file: name one of its checkpoints "
        "(last.ckpt, step10.ckpt)"
    )


def test_a_damaged_checkpoint_among_those_to_average_is_named(checkpoint, tmp_path):
    (tmp_path / "good.ckpt").write_bytes(checkpoint.read_bytes())
    path = damaged(tmp_path / "good.ckpt", "truncated")
    with pytest.raises(CheckpointError, match=f"{path}: unreadable"):
        last_checkpoints(tmp_path, 1)


def test_translate_says_what_is_wrong_with_a_damaged_checkpoint(checkpoint, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("one two\n")
    with pytest.raises(SystemExit, match="error: .*truncated.ckpt: unreadable"):
        translate_main([str(damaged(checkpoint, "truncated")), str(source)])
    with pytest.raises(SystemExit, match="error: .*No such file"):
        translate_main([str(checkpoint), str(tmp_path / "missing.txt")])


def test_translate_and_evaluate_of_a_folder_suggest_a_file_or_average_last(
    checkpoint, tmp_path, monkeypatch, capsys
):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "last.ckpt").write_bytes(checkpoint.read_bytes())
    source = tmp_path / "in.txt"
    source.write_text("one two\nthree\n")
    expected = (
        f"error: {folder} is a folder, not a checkpoint file: name one of its checkpoints "
        "(last.ckpt), or average its last N with --average-last N"
    )
    with pytest.raises(SystemExit) as info:
        translate_main([str(folder), str(source)])
    assert info.value.code == expected
    with pytest.raises(SystemExit) as info:
        evaluate_main([str(folder), "--src", str(source), "--ref", str(source)])
    assert info.value.code == expected
    capsys.readouterr()
    periodic = {**torch.load(checkpoint, weights_only=True), KIND_KEY: PERIODIC}
    torch.save(periodic, folder / "step3.ckpt")  # the same weights, as the policy marks them
    translate_main([str(folder), str(source), "--average-last", "1"])
    averaged = capsys.readouterr().out
    translate_main([str(folder / "last.ckpt"), str(source)])
    assert averaged == capsys.readouterr().out and len(averaged.splitlines()) == 2


def test_translate_names_a_gz_input_that_is_not_gzip(checkpoint, tmp_path):
    (tmp_path / "in.gz").write_text("one two\n")
    with pytest.raises(SystemExit, match=r"error: .*in.gz: not gzip data, although the name"):
        translate_main([str(checkpoint), str(tmp_path / "in.gz")])


def test_a_tokenizer_that_does_not_parse_is_refused(checkpoint, tmp_path):
    ckpt = torch.load(checkpoint, weights_only=True)
    torch.save({**ckpt, "tokenizer": '{"model": {"type": "BPE", "vocab": '}, tmp_path / "t.ckpt")
    with pytest.raises(SystemExit, match="its tokenizer is unreadable"):
        translate_main([str(tmp_path / "t.ckpt"), str(tmp_path / "t.ckpt")])


# Line 2 empty, 3 blank, 4 longer than the 16 positions, 5 invalid UTF-8, 6 a lone carriage return.
MESSY = b"one two three\n\n   \t\n" + b"four five six " * 40 + b"\ncaf\xe9 one\nseven\reight\n"


def translate_bytes(checkpoint, data: bytes, *args: str, monkeypatch, capsys) -> list[str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    translate_main([str(checkpoint), "--beam-size", "2", "--max-len-b", "3", *args])
    return capsys.readouterr().out.split("\n")[:-1]


def test_translate_keeps_one_output_line_per_input_line_whatever_the_input(
    checkpoint, monkeypatch, capsys, caplog
):
    with caplog.at_level(logging.WARNING):
        out = translate_bytes(checkpoint, MESSY, monkeypatch=monkeypatch, capsys=capsys)
    assert len(out) == 6
    assert out[1] == out[2] == ""
    assert re.search(
        r"line 4: \d+ tokens, more than the model's 15; translating the first 15", caplog.text
    )
    assert "stdin, line 5: not valid UTF-8" in caplog.text and "replaced by U+FFFD" in caplog.text


def test_translate_a_file_with_messy_lines_and_n_best(checkpoint, tmp_path, monkeypatch, capsys):
    source = tmp_path / "in.txt"
    source.write_bytes(MESSY)
    translate_main([str(checkpoint), str(source), "--beam-size", "2", "--n-best", "2"])
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [int(row[0]) for row in rows] == [i for i in range(6) for _ in range(2)]
    assert [row[2] for row in rows if row[0] in ("1", "2")] == [""] * 4


def test_translate_of_an_empty_stdin_prints_nothing_and_succeeds(checkpoint, monkeypatch, capsys):
    assert translate_bytes(checkpoint, b"", monkeypatch=monkeypatch, capsys=capsys) == []


def test_translate_ignores_a_byte_order_mark(checkpoint, monkeypatch, capsys):
    plain = translate_bytes(checkpoint, b"one two\nthree\n", monkeypatch=monkeypatch, capsys=capsys)
    marked = b"\xef\xbb\xbfone two\r\nthree\r\n"  # as Windows editors save text
    assert translate_bytes(checkpoint, marked, monkeypatch=monkeypatch, capsys=capsys) == plain


def test_evaluate_names_the_line_of_invalid_utf8_instead_of_guessing(checkpoint, tmp_path):
    (tmp_path / "src.txt").write_bytes(b"one\ncaf\xe9\n")
    (tmp_path / "ref.txt").write_text("eins\nzwei\n")
    args = ["--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt")]
    with pytest.raises(SystemExit, match=r"src.txt, line 2: not valid UTF-8"):
        evaluate_main([str(checkpoint), *args, "--output-dir", str(tmp_path / "out")])
