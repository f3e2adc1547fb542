"""Several corpora as one training corpus: each upsampled by a factor, or given a share (weight).

Real and synthetic (back-translated, distilled), in-domain and general data train together: the
train split holds each corpus's pairs `factor` times, the whole part as copies and the fraction as
a seeded draw (each pair once more with that probability), so a corpus's share of an epoch is
its factor within binomial sampling error. `weight` instead fixes a corpus's share of an epoch:
weights w_i over corpora of n_i pairs are the factors w_i / sum(w) * sum(n) / n_i, so the epoch
keeps the corpora's total size. Validation and test come from one corpus, `eval_corpus` (the
first by default): the domain the run is for. The mixture is a `Corpus`, so the tokenizer, the
token store and its fingerprint treat it as any other.
"""

import random
from collections.abc import Iterator, Mapping
from typing import Any

from transformer_nmt.data.corpus import Corpus

OPTION = "data.corpus.corpora"  # where the components are configured, for error messages


class CorpusMixture:
    """Training pairs drawn from several corpora by upsampling factor or weight.

    Args:
        corpora: name -> {"corpus": a Corpus, and "factor" (copies per epoch, > 0) or "weight"
            (share of the epoch, > 0)}; all components give factors, or all give weights.
        eval_corpus: the component whose val and test splits the mixture's are; None: the first.
        seed: seeds the draw of fractional factors.
    """

    def __init__(
        self,
        corpora: Mapping[str, Mapping[str, Any]],
        eval_corpus: str | None = None,
        seed: int = 0,
    ):
        if not corpora:
            raise ValueError(f"{OPTION} is empty: name at least one corpus")
        kinds = set()
        for name, component in corpora.items():
            given = [key for key in ("factor", "weight") if component.get(key) is not None]
            if len(given) != 1 or "corpus" not in component:
                raise ValueError(
                    f"{OPTION}.{name} needs a corpus and exactly one of factor (upsampling) or "
                    f"weight (share of an epoch); it has {sorted(component)}"
                )
            if not all(hasattr(component["corpus"], m) for m in ("stream", "fingerprint")):
                raise ValueError(
                    f"{OPTION}.{name}.corpus is a {type(component['corpus']).__name__}, not a "
                    "corpus: give it a _target_ such as transformer_nmt.data.bitext.TextCorpus"
                )
            (kind,) = given
            kinds.add(kind)
            value = component[kind]
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(
                    f"{OPTION}.{name}.{kind}={value!r} must be a number > 0; leave the corpus "
                    "out of the mixture to train without it"
                )
        if len(kinds) > 1:
            raise ValueError(
                f"{OPTION} mixes factors and weights: give every corpus a factor, or every one "
                "a weight"
            )
        self.eval_corpus = eval_corpus or next(iter(corpora))
        if self.eval_corpus not in corpora:
            raise ValueError(
                f"data.corpus.eval_corpus={eval_corpus!r} is none of {OPTION}: {sorted(corpora)}"
            )
        self.corpora: dict[str, Corpus] = {name: c["corpus"] for name, c in corpora.items()}
        (self.kind,) = kinds
        self.values = {name: float(c[self.kind]) for name, c in corpora.items()}
        self.seed = seed

    def factors(self, src_lang: str, tgt_lang: str) -> dict[str, float]:
        """Each corpus's upsampling factor; weights are turned into factors by counting pairs."""
        if self.kind == "factor":
            return dict(self.values)
        sizes = {
            name: sum(1 for _ in corpus.stream("train", src_lang, tgt_lang))
            for name, corpus in self.corpora.items()
        }
        total, weights = sum(sizes.values()), sum(self.values.values())
        return {name: w / weights * total / sizes[name] for name, w in self.values.items()}

    def stream(self, split: str, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
        """The train split mixed; the other splits are `eval_corpus`'s."""
        if split != "train":
            return self.corpora[self.eval_corpus].stream(split, src_lang, tgt_lang)
        return self._mixed(src_lang, tgt_lang)

    def _mixed(self, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
        rng = random.Random(self.seed)
        for name, factor in self.factors(src_lang, tgt_lang).items():
            whole, fraction = divmod(factor, 1.0)
            for pair in self.corpora[name].stream("train", src_lang, tgt_lang):
                for _ in range(int(whole) + (rng.random() < fraction)):
                    yield pair

    def read(self, split: str, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
        """Return `list(self.stream(...))`."""
        return list(self.stream(split, src_lang, tgt_lang))

    def fingerprint(self, split: str, src_lang: str, tgt_lang: str) -> str:
        """Every component's fingerprint, factor or weight, and the seed; eval splits: one's."""
        if split != "train":
            return self.corpora[self.eval_corpus].fingerprint(split, src_lang, tgt_lang)
        parts = [
            f"{name} {self.kind}={self.values[name]}: "
            f"{corpus.fingerprint(split, src_lang, tgt_lang)}"
            for name, corpus in self.corpora.items()
        ]
        return f"CorpusMixture({'; '.join(parts)}; seed={self.seed})"
