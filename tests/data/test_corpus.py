import logging

import pytest

from transformer_nmt.data.corpus import DataError, clean_pairs, source_split


def test_clean_pairs_strips_and_drops_pairs_with_an_empty_side(caplog):
    src = ["  a b ", "", "c", "d\t", "e"]
    tgt = ["x", "y", " ", "w \r", "v"]
    with caplog.at_level(logging.WARNING):
        pairs = list(clean_pairs(zip(src, tgt, strict=True), where="here"))
    assert pairs == [("a b", "x"), ("d", "w"), ("e", "v")]
    assert "here: dropped 2 of 5 pairs" in caplog.text


def test_clean_pairs_logs_nothing_when_nothing_is_dropped(caplog):
    with caplog.at_level(logging.WARNING):
        assert list(clean_pairs([("a", "b")], where="here")) == [("a", "b")]
    assert caplog.text == ""


def test_source_split_maps_and_names_the_known_splits():
    splits = {"train": "train", "val": "validation"}
    assert source_split(splits, "val") == "validation"
    with pytest.raises(DataError, match=r"'test'.*\['train', 'val'\]"):
        source_split(splits, "test")
