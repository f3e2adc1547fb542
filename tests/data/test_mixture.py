"""Weighted corpora: each corpus's share of the training pairs is its factor or weight, within
sampling error; a factor or weight <= 0 is refused naming it; val and test are one corpus's."""

import math
from collections import Counter
from pathlib import Path

import pytest
from hydra.utils import instantiate

from helpers.hydra_compose import compose_train
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.mixture import CorpusMixture


def text_corpus(folder: Path, name: str, size: int) -> TextCorpus:
    """`size` distinct pairs whose text names the corpus, in train and val."""
    folder.mkdir()
    for split in ("train", "val"):
        for lang in ("en", "de"):
            lines = (f"{name} {split} {lang} {i}\n" for i in range(size))
            (folder / f"{split}.{lang}").write_text("".join(lines))
    return TextCorpus(str(folder))


@pytest.fixture
def corpora(tmp_path) -> dict[str, TextCorpus]:
    return {
        "in_domain": text_corpus(tmp_path / "a", "in_domain", 100),
        "synthetic": text_corpus(tmp_path / "b", "synthetic", 1000),
    }


def copies(mixture: CorpusMixture) -> dict[str, Counter]:
    """Per corpus, how many times each of its pairs is in the mixed train split."""
    counts = {name: Counter() for name in mixture.corpora}
    for src, _ in mixture.stream("train", "en", "de"):
        counts[src.split()[0]][src] += 1
    return counts


def within_sampling_error(count: int, pairs: int, factor: float) -> bool:
    """`count` within 4 standard deviations of `pairs` x `factor` (a binomial fractional part)."""
    fraction = factor % 1
    return abs(count - pairs * factor) <= 4 * math.sqrt(pairs * fraction * (1 - fraction)) + 1e-9


def test_factors_copy_each_corpus_within_sampling_error(corpora):
    mixture = CorpusMixture(
        {"in_domain": {"corpus": corpora["in_domain"], "factor": 3},
         "synthetic": {"corpus": corpora["synthetic"], "factor": 0.4}},
        seed=0,
    )  # fmt: skip
    counts = copies(mixture)
    assert set(counts["in_domain"].values()) == {3} and len(counts["in_domain"]) == 100
    assert set(counts["synthetic"].values()) == {1}  # a pair drawn at most once
    assert within_sampling_error(counts["synthetic"].total(), 1000, 0.4)
    again = copies(CorpusMixture(dict(mixture_components(mixture)), seed=0))
    assert again == counts  # the draw is the seed's


def mixture_components(mixture: CorpusMixture):
    for name, corpus in mixture.corpora.items():
        yield name, {"corpus": corpus, mixture.kind: mixture.values[name]}


def test_weights_give_each_corpus_its_share_of_the_epoch(corpora):
    mixture = CorpusMixture(
        {"in_domain": {"corpus": corpora["in_domain"], "weight": 1},
         "synthetic": {"corpus": corpora["synthetic"], "weight": 3}},
    )  # fmt: skip
    # 1100 pairs an epoch, a quarter of them in-domain: factors 2.75 and 0.825.
    assert mixture.factors("en", "de") == pytest.approx({"in_domain": 2.75, "synthetic": 0.825})
    counts = copies(mixture)
    assert set(counts["in_domain"].values()) <= {2, 3}
    assert within_sampling_error(counts["in_domain"].total(), 100, 2.75)
    assert within_sampling_error(counts["synthetic"].total(), 1000, 0.825)


@pytest.mark.parametrize(
    "component, named",
    [
        ({"factor": 0}, "data.corpus.corpora.synthetic.factor=0 must be a number > 0"),
        ({"factor": -1.5}, "data.corpus.corpora.synthetic.factor=-1.5 must be"),
        ({"weight": 0.0}, "data.corpus.corpora.synthetic.weight=0.0 must be"),
        ({"factor": "2"}, "data.corpus.corpora.synthetic.factor='2' must be"),
        ({"factor": 1, "weight": 1}, "synthetic needs a corpus and exactly one of factor"),
        ({}, "synthetic needs a corpus and exactly one of factor"),
    ],
    ids=["zero", "negative", "zero-weight", "text", "both", "neither"],
)
def test_a_bad_factor_or_weight_is_refused_naming_it(corpora, component, named):
    with pytest.raises(ValueError, match=named):
        CorpusMixture(
            {"in_domain": {"corpus": corpora["in_domain"], "factor": 1},
             "synthetic": {"corpus": corpora["synthetic"], **component}},
        )  # fmt: skip


def test_factors_and_weights_do_not_mix(corpora):
    with pytest.raises(ValueError, match="mixes factors and weights"):
        CorpusMixture(
            {"in_domain": {"corpus": corpora["in_domain"], "factor": 1},
             "synthetic": {"corpus": corpora["synthetic"], "weight": 1}},
        )  # fmt: skip


def test_val_is_the_eval_corpus_and_the_fingerprint_follows_the_factors(corpora):
    def mixture(factor: float, eval_corpus: str | None = None) -> CorpusMixture:
        return CorpusMixture(
            {"in_domain": {"corpus": corpora["in_domain"], "factor": 1},
             "synthetic": {"corpus": corpora["synthetic"], "factor": factor}},
            eval_corpus=eval_corpus,
        )  # fmt: skip

    assert mixture(1).read("val", "en", "de") == corpora["in_domain"].read("val", "en", "de")
    synthetic_val = mixture(1, "synthetic").read("val", "en", "de")
    assert synthetic_val == corpora["synthetic"].read("val", "en", "de")
    assert mixture(1).fingerprint("train", "en", "de") != mixture(2).fingerprint(
        "train", "en", "de"
    )
    assert mixture(1).fingerprint("val", "en", "de") == mixture(2).fingerprint("val", "en", "de")
    with pytest.raises(ValueError, match="eval_corpus='general' is none of"):
        mixture(1, "general")


def test_the_toy_mixture_config_encodes_the_mixed_pairs(tmp_path):
    datamodule = instantiate(compose_train(tmp_path, ["data=toy_mixture"]).data)
    datamodule.setup("fit")
    mixed = datamodule.corpus.read("train", "en", "de")
    assert len(datamodule.datasets["train"]) + datamodule.dropped["train"] == len(mixed)
    in_domain = datamodule.corpus.corpora["in_domain"].read("train", "en", "de")
    assert mixed[: 3 * len(in_domain)] == [pair for pair in in_domain for _ in range(3)]
    assert len(datamodule.datasets["val"]) == 100
