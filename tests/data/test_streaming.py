"""Preparation streams the train split: read, BPE-trained and encoded a chunk at a time."""

import pytest

from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.corpus import DataFormatError
from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.dataset import encode_pairs


def write(folder, split, lang, lines: list[bytes]) -> None:
    (folder / f"{split}.{lang}").write_bytes(b"".join(line + b"\n" for line in lines))


class StreamOnly(TextCorpus):
    """A corpus whose whole-split list must never be asked for."""

    def read(self, split, src_lang, tgt_lang):
        raise AssertionError(f"read({split!r}) held the whole split as a list")


def corpus(tmp_path, train_de: list[bytes] | None = None) -> StreamOnly:
    for split in ("train", "val"):
        write(tmp_path, split, "en", [b"one two %d" % i for i in range(200)])
        write(tmp_path, split, "de", [b"eins zwei %d" % i for i in range(200)])
    if train_de is not None:
        write(tmp_path, "train", "de", train_de)
    return StreamOnly(str(tmp_path))


def datamodule(corpus, tmp_path) -> TranslationDataModule:
    return TranslationDataModule(
        corpus, "en", "de", vocab_size=300, max_tokens=64, max_len=16, cache_dir=tmp_path / "c"
    )


def test_a_file_is_read_as_its_pairs_are_taken(tmp_path):
    write(tmp_path, "train", "en", [b"a", b"b", b"c"])
    write(tmp_path, "train", "de", [b"x", b"y", b"\xff"])
    pairs = TextCorpus(str(tmp_path)).stream("train", "en", "de")
    assert [next(pairs), next(pairs)] == [("a", "x"), ("b", "y")]  # before line 3 is decoded
    with pytest.raises(DataFormatError, match=r"train\.de, line 3: not valid UTF-8"):
        next(pairs)


def test_preparation_streams_every_split_and_stores_what_a_list_would(tmp_path):
    dm = datamodule(corpus(tmp_path), tmp_path)
    dm.prepare_data()
    dm.setup("fit")
    tokenizer = dm.load_tokenizer()
    pairs = TextCorpus(str(tmp_path)).read("train", "en", "de")
    expected, _ = encode_pairs(pairs, tokenizer, 16, keep_text=False)
    stored = dm.datasets["train"]
    assert len(stored) == len(expected) == 200
    assert stored.src.values.tolist() == expected.src.values.tolist()
    assert stored.tgt.offsets.tolist() == expected.tgt.offsets.tolist()


def test_files_that_part_at_the_end_leave_no_tokenizer_and_no_store(tmp_path):
    # The mismatch shows only once the stream has been read to its end, after BPE has seen it all.
    short = [b"eins zwei %d" % i for i in range(199)]
    dm = datamodule(corpus(tmp_path, train_de=short), tmp_path)
    with pytest.raises(DataFormatError, match=r"train\.en has 200 lines but .*train\.de has 199"):
        dm.prepare_data()
    assert [*(tmp_path / "c").glob("bpe*"), *(tmp_path / "c").glob("tokens*")] == []
