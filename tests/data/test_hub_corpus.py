"""HubCorpus on local folders shaped like the Hub repos, since this machine cannot reach the Hub."""

import json

import datasets
import pytest
from hydra.utils import instantiate

from helpers.hydra_compose import compose_train
from transformer_nmt.data import hub_corpus
from transformer_nmt.data.corpus import DataError, DataFormatError, DataNotFoundError
from transformer_nmt.data.hub_corpus import HubCorpus

HUB_SPLITS = ("train", "validation", "test")

# Same YAML front matter as the wmt/wmt14 dataset card: one config per language pair.
WMT_README = """---
configs:
- config_name: de-en
  data_files:
  - split: train
    path: de-en/train-*
  - split: validation
    path: de-en/validation-*
  - split: test
    path: de-en/test-*
---
# wmt14 (local copy of the shape)
"""


def sentences(split: str, lang: str) -> list[str]:
    return [f"{lang} {split} sentence {i}" for i in range(3)]


@pytest.fixture(scope="module")
def wmt14_dir(tmp_path_factory):
    """A folder shaped like wmt/wmt14: parquet per split, one `translation` column."""
    root = tmp_path_factory.mktemp("wmt14")
    (root / "de-en").mkdir()
    for split in HUB_SPLITS:
        rows = [
            {"de": de, "en": en}
            for de, en in zip(sentences(split, "de"), sentences(split, "en"), strict=True)
        ]
        datasets.Dataset.from_dict({"translation": rows}).to_parquet(
            root / "de-en" / f"{split}-00000-of-00001.parquet"
        )
    (root / "README.md").write_text(WMT_README)
    return root


@pytest.fixture(scope="module")
def multi30k_hub_dir(tmp_path_factory):
    """A folder shaped like bentrevett/multi30k: train/val/test.jsonl with `en` and `de` keys."""
    root = tmp_path_factory.mktemp("multi30k")
    for file_split, split in zip(("train", "val", "test"), HUB_SPLITS, strict=True):
        rows = zip(sentences(split, "en"), sentences(split, "de"), strict=True)
        lines = [json.dumps({"en": en, "de": de}, ensure_ascii=False) for en, de in rows]
        (root / f"{file_split}.jsonl").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def cache_dir(tmp_path) -> str:
    return str(tmp_path / "hf-cache")


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_wmt14_shape_reads_the_translation_column_both_ways(wmt14_dir, cache_dir, split):
    corpus = HubCorpus(str(wmt14_dir), "de-en", cache_dir=cache_dir)
    hub_split = dict(zip(("train", "val", "test"), HUB_SPLITS, strict=True))[split]
    expected = list(zip(sentences(hub_split, "en"), sentences(hub_split, "de"), strict=True))
    assert corpus.read(split, "en", "de") == expected
    assert corpus.read(split, "de", "en") == [(de, en) for en, de in expected]


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_multi30k_shape_reads_flat_language_columns_both_ways(multi30k_hub_dir, cache_dir, split):
    corpus = HubCorpus(str(multi30k_hub_dir), cache_dir=cache_dir)
    # load_dataset names the split of val.jsonl "validation", as on the Hub.
    hub_split = dict(zip(("train", "val", "test"), HUB_SPLITS, strict=True))[split]
    expected = list(zip(sentences(hub_split, "de"), sentences(hub_split, "en"), strict=True))
    assert corpus.read(split, "de", "en") == expected
    assert corpus.read(split, "en", "de") == [(en, de) for de, en in expected]


def test_wrong_language_names_the_columns_found(wmt14_dir, multi30k_hub_dir, cache_dir):
    with pytest.raises(DataFormatError, match=r"'fr'.*\['translation.de', 'translation.en'\]"):
        HubCorpus(str(wmt14_dir), "de-en", cache_dir=cache_dir).read("val", "en", "fr")
    with pytest.raises(DataFormatError, match=r"'cs'.*\['en', 'de'\]"):
        HubCorpus(str(multi30k_hub_dir), cache_dir=cache_dir).read("test", "cs", "en")


def test_unknown_split_is_refused(multi30k_hub_dir, cache_dir):
    with pytest.raises(DataError, match="unknown split 'dev'"):
        HubCorpus(str(multi30k_hub_dir), cache_dir=cache_dir).read("dev", "en", "de")


def test_hub_names_reach_load_dataset(monkeypatch):
    calls = []

    def fake_load_dataset(name, config, split, cache_dir):
        calls.append((name, config, split, cache_dir))
        return datasets.Dataset.from_dict({"translation": [{"de": " a ", "en": "b"}]})

    monkeypatch.setattr(hub_corpus.datasets, "load_dataset", fake_load_dataset)
    pairs = HubCorpus("wmt/wmt14", "de-en").read("test", "en", "de")
    assert calls == [("wmt/wmt14", "de-en", "test", None)]
    assert pairs == [("b", "a")]


def test_unreachable_hub_says_how_to_work_offline(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'wmt/wmt14' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(hub_corpus.datasets, "load_dataset", offline)
    with pytest.raises(DataNotFoundError, match="wmt/wmt14.*local copy"):
        HubCorpus("wmt/wmt14", "de-en").read("train", "en", "de")


def test_fingerprint_tells_datasets_and_splits_apart():
    wmt = HubCorpus("wmt/wmt14", "de-en")
    assert wmt.fingerprint("train", "en", "de") != wmt.fingerprint("val", "en", "de")
    assert wmt.fingerprint("train", "en", "de") != HubCorpus("wmt/wmt16", "de-en").fingerprint(
        "train", "en", "de"
    )


def test_reading_streams_record_batches_and_cleaning_keeps_its_counts(
    tmp_path, monkeypatch, caplog
):
    """Batches smaller than the split: every row read once, in order, the blanks counted."""
    de = [f"satz {i}" if i % 4 else " " for i in range(25)]
    en = [f"sentence {i}" if i % 5 else None for i in range(25)]
    datasets.Dataset.from_dict({"de": de, "en": en}).to_parquet(tmp_path / "train.parquet")
    monkeypatch.setattr(hub_corpus, "READ_BATCH", 4)

    def whole_columns(*args, **kwargs):
        raise AssertionError("a whole split turned into Python lists")

    monkeypatch.setattr(datasets.Dataset, "to_dict", whole_columns)
    corpus = HubCorpus(str(tmp_path), splits={"train": "train"}, cache_dir=str(tmp_path / "c"))
    pairs = corpus.read("train", "de", "en")
    assert pairs == [(d, e) for d, e in zip(de, en, strict=True) if d.strip() and e]
    dropped = sum(1 for d, e in zip(de, en, strict=True) if not (d.strip() and e))
    assert f"dropped {dropped} of 25 pairs with an empty side" in caplog.text


def test_multi30k_experiment_reads_the_hub_copy_through_the_datamodule(multi30k_hub_dir, tmp_path):
    # The README's quick start on a machine without local Multi30k text files.
    overrides = [
        "experiment=multi30k_de_en",
        "data=multi30k_hub",
        f"data.corpus.name={multi30k_hub_dir}",
        f"+data.corpus.cache_dir={tmp_path / 'hf-cache'}",
        "data.vocab_size=300",  # a tiny corpus: fewer pieces than the experiment's 8000
        "data.min_frequency=1",
    ]
    cfg = compose_train(tmp_path, overrides)
    assert cfg.task_name == "multi30k_de_en"  # the experiment's settings stay
    assert cfg.data.corpus._target_ == "transformer_nmt.data.hub_corpus.HubCorpus"
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    val = dm.datasets["val"]
    expected = list(zip(sentences("validation", "de"), sentences("validation", "en"), strict=True))
    assert list(zip(val.src_text, val.tgt_text, strict=True)) == expected  # de -> en
    assert len(dm.datasets["train"]) == len(sentences("train", "de"))
