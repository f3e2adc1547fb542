import pytest

from transformer_nmt.data.corpus import DataError
from transformer_nmt.data.toy import ENGLISH, GERMAN, ToyCorpus

SPLITS = ("train", "val", "test")


def read_all(corpus: ToyCorpus) -> dict[str, list[tuple[str, str]]]:
    return {split: corpus.read(split, "en", "de") for split in SPLITS}


def test_same_seed_same_data_other_seed_other_data():
    assert read_all(ToyCorpus(seed=3)) == read_all(ToyCorpus(seed=3))
    assert read_all(ToyCorpus(seed=3)) != read_all(ToyCorpus(seed=4))


def test_splits_have_the_requested_sizes_and_are_disjoint():
    data = read_all(ToyCorpus(num_train=300, num_val=40, num_test=50))
    assert {split: len(pairs) for split, pairs in data.items()} == {
        "train": 300,
        "val": 40,
        "test": 50,
    }
    sources = {split: {src for src, _ in pairs} for split, pairs in data.items()}
    assert sum(map(len, sources.values())) == 390  # no duplicates inside a split either
    assert not sources["train"] & sources["val"]
    assert not sources["train"] & sources["test"]
    assert not sources["val"] & sources["test"]


def test_target_is_the_source_in_german_reversed():
    to_german = dict(zip(ENGLISH, GERMAN, strict=True))
    for src, tgt in ToyCorpus(min_len=2, max_len=6).read("train", "en", "de"):
        words = src.split()
        assert 2 <= len(words) <= 6
        assert tgt.split() == [to_german[w] for w in reversed(words)]


def test_reading_de_en_swaps_the_sides():
    corpus = ToyCorpus()
    assert corpus.read("val", "de", "en") == [(de, en) for en, de in corpus.read("val", "en", "de")]


def test_val_and_test_do_not_depend_on_the_train_size():
    small, large = ToyCorpus(num_train=10), ToyCorpus(num_train=500)
    for split in ("val", "test"):
        assert small.read(split, "en", "de") == large.read(split, "en", "de")


@pytest.mark.parametrize("langs", [("en", "fr"), ("en", "en"), ("fr", "de")])
def test_other_languages_are_refused(langs):
    with pytest.raises(DataError, match="en<->de only"):
        ToyCorpus().read("train", *langs)


def test_unknown_split_is_refused():
    with pytest.raises(DataError, match="unknown split 'dev'"):
        ToyCorpus().read("dev", "en", "de")


def test_more_examples_than_distinct_sequences_is_refused():
    with pytest.raises(ValueError, match="only 20 distinct sequences"):
        ToyCorpus(num_train=15, num_val=5, num_test=5, min_len=1, max_len=1)


def test_fingerprint_follows_every_setting():
    base = ToyCorpus().fingerprint("train", "en", "de")
    others = [
        ToyCorpus(num_train=1999),
        ToyCorpus(num_val=99),
        ToyCorpus(min_len=2),
        ToyCorpus(max_len=11),
        ToyCorpus(seed=1),
    ]
    assert all(c.fingerprint("train", "en", "de") != base for c in others)
