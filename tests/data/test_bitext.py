import gzip
import logging
import re

import pytest

from transformer_nmt.data.bitext import TextCorpus, decode_lines, read_lines
from transformer_nmt.data.corpus import DataError, DataFormatError, DataNotFoundError


def write(path, lines: list[str]) -> None:
    """Write lines as UTF-8, gzipped when the name ends in .gz."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)


def test_reads_plain_and_gzipped_files_stripping_line_ends(tmp_path):
    write(tmp_path / "train.en", ["a cat ", "two dogs\r"])
    write(tmp_path / "train.de.gz", ["eine Katze", "zwei Hunde\t"])
    corpus = TextCorpus(str(tmp_path))
    assert corpus.read("train", "en", "de") == [("a cat", "eine Katze"), ("two dogs", "zwei Hunde")]
    assert corpus.read("train", "de", "en") == [("eine Katze", "a cat"), ("zwei Hunde", "two dogs")]


def test_splits_map_to_file_names(tmp_path):
    write(tmp_path / "test_2016_flickr.en", ["a"])
    write(tmp_path / "test_2016_flickr.de", ["b"])
    corpus = TextCorpus(str(tmp_path), splits={"test": "test_2016_flickr"})
    assert corpus.read("test", "en", "de") == [("a", "b")]
    with pytest.raises(DataError, match="unknown split 'train'"):
        corpus.read("train", "en", "de")


def test_missing_language_names_the_file_and_lists_the_folder(tmp_path):
    write(tmp_path / "train.en", ["a"])
    write(tmp_path / "val.en.gz", ["a"])
    with pytest.raises(DataNotFoundError) as info:
        TextCorpus(str(tmp_path)).read("train", "en", "de")
    message = str(info.value)
    assert "train.de or train.de.gz" in message
    assert "it holds: train.en, val.en.gz" in message
    assert isinstance(info.value, FileNotFoundError)


def test_missing_folder_says_so(tmp_path):
    with pytest.raises(DataNotFoundError, match="does not exist"):
        TextCorpus(str(tmp_path / "nowhere")).read("train", "en", "de")


def test_plain_and_gzipped_copies_of_one_file_are_refused(tmp_path):
    for name in ("train.en", "train.en.gz", "train.de"):
        write(tmp_path / name, ["a"])
    with pytest.raises(DataFormatError, match=r"train\.en and .*train\.en\.gz"):
        TextCorpus(str(tmp_path)).read("train", "en", "de")


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    write(tmp_path / "train.en", ["a", "b", "c"])
    write(tmp_path / "train.de.gz", ["x", "y"])
    with pytest.raises(DataFormatError) as info:
        TextCorpus(str(tmp_path)).read("train", "en", "de")
    assert f"{tmp_path / 'train.en'} has 3 lines but {tmp_path / 'train.de.gz'} has 2" in str(
        info.value
    )


@pytest.mark.parametrize("name", ["train.de", "train.de.gz"])
def test_invalid_utf8_names_the_file_and_line(tmp_path, name):
    write(tmp_path / "train.en", ["a", "b", "c"])
    data = b"x\ny\ncaf\xe9\n"  # Latin-1 é on line 3
    (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(
        DataFormatError, match=re.escape(f"{tmp_path / name}, line 3: not valid UTF-8")
    ):
        TextCorpus(str(tmp_path)).read("train", "en", "de")


def test_a_gz_file_of_plain_text_is_named_with_what_to_do(tmp_path):
    write(tmp_path / "train.en", ["a"])
    (tmp_path / "train.de.gz").write_text("Eine Gruppe\n")  # plain text under a .gz name
    with pytest.raises(DataFormatError) as info:
        TextCorpus(str(tmp_path)).read("train", "en", "de")
    assert str(info.value) == (
        f"{tmp_path / 'train.de.gz'}: not gzip data, although the name ends in .gz: if it holds "
        "plain text, rename it without .gz, or compress it with gzip"
    )


def test_a_cut_gz_file_is_named(tmp_path):
    data = gzip.compress(("".join(f"line {i}\n" for i in range(1000))).encode())
    path = tmp_path / "train.de.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match=re.escape(f"{path}: damaged gzip data (EOFError")):
        read_lines(path)
    (tmp_path / "empty.gz").write_bytes(b"")
    assert read_lines(tmp_path / "empty.gz") == []  # empty, as an empty plain file


@pytest.mark.parametrize("name", ["train.de", "train.de.gz"])
def test_a_byte_order_mark_is_dropped_from_the_first_line_only(tmp_path, name):
    write(tmp_path / "train.en", ["A group", "\ufeffa"])
    write(tmp_path / name, ["\ufeffEine Gruppe", "\ufeffb"])  # e.g. saved by Notepad
    pairs = TextCorpus(str(tmp_path)).read("train", "en", "de")
    # Inside the text, U+FEFF is a (deprecated) zero-width no-break space: kept as written.
    assert pairs == [("A group", "Eine Gruppe"), ("\ufeffa", "\ufeffb")]
    lines = decode_lines([b"\xef\xbb\xbfone\r\n", b"two\n"], "stdin")
    assert list(lines) == ["one\r\n", "two\n"]


def test_pairs_with_an_empty_side_are_dropped_and_counted(tmp_path, caplog):
    write(tmp_path / "val.en", ["a", "", "c", "  ", "e"])
    write(tmp_path / "val.de", ["v", "w", "", "y", "z"])
    with caplog.at_level(logging.WARNING):
        pairs = TextCorpus(str(tmp_path)).read("val", "en", "de")
    assert pairs == [("a", "v"), ("e", "z")]
    assert "dropped 3 of 5 pairs with an empty side" in caplog.text


def test_fingerprint_changes_with_the_files(tmp_path):
    write(tmp_path / "train.en", ["a"])
    write(tmp_path / "train.de", ["b"])
    corpus = TextCorpus(str(tmp_path))
    before = corpus.fingerprint("train", "en", "de")
    assert corpus.fingerprint("train", "de", "en") != before
    write(tmp_path / "train.de", ["b, longer"])
    assert corpus.fingerprint("train", "en", "de") != before


def test_multi30k_splits_have_the_published_sizes(multi30k_dir):
    corpus = TextCorpus(
        str(multi30k_dir), splits={"train": "train", "val": "val", "test": "test_2016_flickr"}
    )
    train = corpus.read("train", "de", "en")
    assert len(train) == 29000
    assert train[0] == (
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
        "Two young, White males are outside near many bushes.",
    )
    assert len(corpus.read("val", "en", "de")) == 1014
    assert len(corpus.read("test", "en", "fr")) == 1000
