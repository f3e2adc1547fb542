"""Config groups composed as training composes them, and `nmt-evaluate --data`: a split of a data
config, read by the corpus class training uses."""

import re

import pytest

from transformer_nmt.cli.compose import compose_group, read_split
from transformer_nmt.data.corpus import DataError
from transformer_nmt.data.toy import ToyCorpus


def test_a_config_split_with_overrides_is_what_its_corpus_reads():
    pairs, src, tgt = read_split("toy", "test", ["data.corpus.num_test=7", "seed=3"])
    assert (src, tgt) == ("en", "de")
    expected = ToyCorpus(num_train=2000, num_val=100, num_test=7, seed=3).read("test", "en", "de")
    assert pairs == expected


def test_project_root_places_the_data_a_config_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("PROJECT_ROOT", str(tmp_path))
    monkeypatch.delenv("NMT_DATA_DIR", raising=False)
    assert compose_group("data", "multi30k").corpus.path == f"{tmp_path}/data/multi30k"


def test_a_group_option_is_composed_with_its_defaults_chain():
    narrow = compose_group("model", "narrow")  # narrow on small on base
    assert (narrow.d_model, narrow.N, narrow.d_ff, narrow.h) == (192, 3, 1024, 4)
    assert narrow.positions == "sinusoidal"  # from base


@pytest.mark.parametrize(
    "data, overrides", [("no_such_data", []), ("toy", ["data.corpus.no_such_option=1"])]
)
def test_a_config_that_does_not_compose_is_a_data_error_naming_it(data, overrides):
    with pytest.raises(
        DataError, match=re.escape(f"data config '{data}' with overrides {overrides}")
    ):
        read_split(data, "test", overrides)
