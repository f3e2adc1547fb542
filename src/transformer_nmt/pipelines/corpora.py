"""The corpora a pipeline trains on: synthetic pairs as files, and the configs that read them."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformer_nmt.data.bitext import iter_lines
from transformer_nmt.data.corpus import Corpus
from transformer_nmt.pipelines.stages import Stage, stage_key
from transformer_nmt.runtime.atomic import atomic_open

TEXT_CORPUS = "transformer_nmt.data.bitext.TextCorpus"
MIXTURE = "transformer_nmt.data.mixture.CorpusMixture"


def pair_stage(
    work: Path, name: str, sources: Path, targets: Path, langs: tuple[str, str], tag: str | None
) -> Path:
    """A folder of `train.<src>` (each line after `tag` and a space, if given) and `train.<tgt>`."""
    stage = Stage(work, name, stage_key({"langs": langs, "tag": tag}, [sources, targets]))
    if stage.start():
        prefix = f"{tag} " if tag else ""
        for path, lang, before in ((sources, langs[0], prefix), (targets, langs[1], "")):
            with atomic_open(stage.folder / f"train.{lang}", "w", encoding="utf-8") as f:
                for line in iter_lines(path):
                    f.write(before + line.rstrip("\n") + "\n")
        stage.finish({"sources": str(sources), "targets": str(targets), "tag": tag})
    return stage.folder


def pair_files(folder: Path, langs: tuple[str, str]) -> list[Path]:
    return [folder / f"train.{lang}" for lang in langs]


def text_corpus(folder: Path) -> dict[str, Any]:
    """The config of a folder's train split (pair_stage's)."""
    return {"_target_": TEXT_CORPUS, "path": str(folder), "splits": {"train": "train"}}


def mixture(corpora: dict[str, tuple[dict[str, Any], float]], eval_corpus: str, seed: int) -> dict:
    """The config of a CorpusMixture: name -> (corpus config, upsampling factor)."""
    return {
        "_target_": MIXTURE,
        "corpora": {name: {"corpus": c, "factor": f} for name, (c, f) in corpora.items()},
        "eval_corpus": eval_corpus,
        "seed": seed,
    }


def train_replaced(train: dict[str, Any], evaluation: dict[str, Any]) -> dict[str, Any]:
    """The config of a corpus training on `train` and validating and testing on `evaluation`."""
    return {"_target_": f"{__name__}.TrainReplaced", "train": train, "evaluation": evaluation}


class TrainReplaced:
    """One corpus's train split, another's validation and test: a student trained on distilled
    text alone is still chosen and scored on references."""

    def __init__(self, train: Corpus, evaluation: Corpus):
        self.train, self.evaluation = train, evaluation

    def _of(self, split: str) -> Corpus:
        return self.train if split == "train" else self.evaluation

    def stream(self, split: str, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
        return self._of(split).stream(split, src_lang, tgt_lang)

    def read(self, split: str, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
        return list(self.stream(split, src_lang, tgt_lang))

    def fingerprint(self, split: str, src_lang: str, tgt_lang: str) -> str:
        return self._of(split).fingerprint(split, src_lang, tgt_lang)
