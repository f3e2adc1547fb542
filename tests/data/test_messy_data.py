"""Messy corpora end in a clear message or in counted drops, never in misaligned pairs.

Line-count mismatches, missing files and invalid UTF-8 are covered in test_bitext.py.
"""

import logging

import datasets
import pytest

from transformer_nmt.data import hub_corpus
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.corpus import DataFormatError, DataNotFoundError
from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.hub_corpus import HubCorpus
from transformer_nmt.data.tokenizer import cache_path, load_or_train


def write(folder, split: str, lang: str, lines: list[str]) -> None:
    (folder / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines))


def datamodule(folder, **overrides) -> TranslationDataModule:
    settings = {
        # Validation on the training files: these tests need one split only.
        "corpus": TextCorpus(str(folder), splits={"train": "train", "val": "train"}),
        "src_lang": "en",
        "tgt_lang": "de",
        "vocab_size": 300,
        "min_frequency": 1,
        "max_tokens": 256,
        "max_len": 32,
        "cache_dir": str(folder / "cache"),
    }
    return TranslationDataModule(**{**settings, **overrides})


def test_empty_files_name_both_and_cache_no_tokenizer(tmp_path):
    write(tmp_path, "train", "en", [])
    write(tmp_path, "train", "de", [])
    with pytest.raises(DataFormatError) as info:
        datamodule(tmp_path).prepare_data()
    assert f"{tmp_path / 'train.en'} and {tmp_path / 'train.de'} holds no sentence pairs" in str(
        info.value
    )
    # A tokenizer trained on nothing would be reused by every later run.
    assert not (tmp_path / "cache").exists()


def test_a_side_empty_on_every_line_is_an_error_not_an_empty_corpus(tmp_path):
    write(tmp_path, "train", "en", ["a", "b"])
    write(tmp_path, "train", "de", ["", "  "])
    with pytest.raises(DataFormatError, match="no sentence pairs: all 2 have an empty side"):
        TextCorpus(str(tmp_path)).read("train", "en", "de")


def test_pairs_with_a_nul_byte_are_dropped_and_counted_apart(tmp_path, caplog):
    write(tmp_path, "train", "en", ["a", "b\0c", "d", "", "f"])
    write(tmp_path, "train", "de", ["v", "w", "x\0", "y", "z"])
    with caplog.at_level(logging.WARNING):
        pairs = TextCorpus(str(tmp_path)).read("train", "en", "de")
    assert pairs == [("a", "v"), ("f", "z")]
    assert "dropped 1 of 5 pairs with an empty side" in caplog.text
    assert "dropped 2 of 5 pairs with a NUL byte" in caplog.text


def test_a_corpus_in_utf16_is_an_error_that_says_so(tmp_path):
    # UTF-16 without a byte order mark is valid UTF-8, with a NUL byte in every line (and one
    # line more: the NUL after the last line end).
    (tmp_path / "train.en").write_bytes("a\nb\n".encode("utf-16-le"))
    (tmp_path / "train.de").write_bytes("x\ny\n".encode("utf-16-le"))
    with pytest.raises(DataFormatError, match=r"all 3 have a NUL byte \(a UTF-16 file\? convert"):
        TextCorpus(str(tmp_path)).read("train", "en", "de")


def test_hub_rows_with_a_missing_side_are_dropped_and_counted(monkeypatch, caplog):
    table = {"en": ["a", None, "c", " "], "de": ["x", "y", None, "w"]}
    monkeypatch.setattr(
        hub_corpus.datasets,
        "load_dataset",
        lambda *args, **kwargs: datasets.Dataset.from_dict(table),
    )
    with caplog.at_level(logging.WARNING):
        pairs = HubCorpus("some/dataset").read("train", "en", "de")
    assert pairs == [("a", "x")]
    assert "dropped 3 of 4 pairs with an empty side" in caplog.text


def test_hub_columns_of_other_languages_say_which_settings_to_change(monkeypatch):
    table = {"translation": [{"fr": "a", "en": "b"}]}
    monkeypatch.setattr(
        hub_corpus.datasets,
        "load_dataset",
        lambda *args, **kwargs: datasets.Dataset.from_dict(table),
    )
    with pytest.raises(DataFormatError) as info:
        HubCorpus("wmt/wmt14", "fr-en").read("train", "de", "en")
    message = str(info.value)
    assert "wmt/wmt14[fr-en]/train has no text for language 'de'" in message
    assert "['translation.fr', 'translation.en']" in message
    assert "data.src_lang" in message and "data.corpus.config" in message


def test_a_very_long_line_is_dropped_by_max_len_and_the_rest_stays_aligned(tmp_path, caplog):
    en = [f"sentence {i}" for i in range(20)]
    de = [f"satz {i}" for i in range(20)]
    en[7] = "word " * 20_000  # e.g. a file whose line ends were lost
    write(tmp_path, "train", "en", en)
    write(tmp_path, "train", "de", de)
    dm = datamodule(tmp_path, max_len=32)
    with caplog.at_level(logging.INFO):
        dm.setup("fit")
    assert dm.dropped["train"] == 1
    assert "19 pairs kept, 1 dropped for exceeding data.max_len=32 tokens" in caplog.text
    tokenizer = dm.load_tokenizer()
    kept = dm.datasets["train"]
    decoded = [tokenizer.decode_batch([kept.tgt[i].tolist()])[0] for i in range(len(kept))]
    assert sorted(decoded) == sorted(d for i, d in enumerate(de) if i != 7)
    for i in range(len(kept)):
        src = tokenizer.decode_batch([kept.src[i].tolist()])[0]
        assert src.replace("sentence", "satz") == decoded[i]


def test_a_split_with_every_pair_too_long_names_max_len(tmp_path):
    write(tmp_path, "train", "en", ["one two three four five six"] * 3)
    write(tmp_path, "train", "de", ["eins"] * 3)
    dm = datamodule(tmp_path, max_len=2)
    with pytest.raises(
        DataFormatError, match=r"all 3 pairs .* data\.max_len=2 .* raise data\.max_len"
    ):
        dm.setup("fit")


def test_an_unreadable_cached_tokenizer_is_trained_again(tmp_path, caplog):
    settings = {"vocab_size": 270, "min_frequency": 1, "fingerprint": "corpus"}
    path = cache_path(tmp_path, **settings)
    path.write_text('{"version": "1.0", "trunc')  # a copy cut short
    with caplog.at_level(logging.WARNING):
        tokenizer = load_or_train(tmp_path, lambda: iter(["a cat", "a dog"] * 5), **settings)
    assert tokenizer.decode_batch(tokenizer.encode_batch(["a cat"])) == ["a cat"]
    assert f"{path} is unreadable" in caplog.text
    assert load_or_train(tmp_path, lambda: iter([]), **settings).to_str() == tokenizer.to_str()


def test_a_hub_split_that_does_not_exist_says_how_to_map_it(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text('{"en": "a", "de": "b"}\n')
    corpus = HubCorpus(str(tmp_path / "data"), cache_dir=str(tmp_path / "hf"))
    with pytest.raises(DataNotFoundError) as info:
        corpus.read("val", "en", "de")
    message = str(info.value)
    assert "Unknown split \"validation\". Should be one of ['train']" in message
    assert "data.corpus.splits={val:<name>}" in message
