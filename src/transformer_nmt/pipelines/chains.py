"""The two pipelines, each a chain of cached stages (stages.py) in one work folder.

Back-translation (Sennrich et al., 2016): a reverse model (given, or trained from the forward
run's overrides with the sides swapped) translates target-language text into the source
language; the forward model trains on the real pairs and these synthetic ones, each upsampled
by its factor, the synthetic sources after a tag token if asked (Caswell et al., 2019).

Sequence-level knowledge distillation (Kim and Rush, 2016): the teacher (a checkpoint, an average
of several, or an ensemble) translates the training source with beam search; the student trains
on its translations, alone or mixed with the references, and validates on the references.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

from transformer_nmt.checkpoint import read_checkpoint
from transformer_nmt.data.corpus import Corpus
from transformer_nmt.data.tokenizer_kinds import tokenizer_from_str
from transformer_nmt.pipelines import checks
from transformer_nmt.pipelines.corpora import (
    mixture,
    pair_files,
    pair_stage,
    text_corpus,
    train_replaced,
)
from transformer_nmt.pipelines.stages import Stage, stage_key
from transformer_nmt.pipelines.training import (
    check_stage,
    compose_run,
    data_config,
    train_stage,
)
from transformer_nmt.pipelines.translation import Decoding, translate_stage
from transformer_nmt.runtime.atomic import atomic_open
from transformer_nmt.training.plan.config_checks import ConfigError


@dataclass(frozen=True)
class BackTranslation:
    """What `nmt-pipeline backtranslate` runs; `overrides` are the forward run's."""

    work: Path
    monolingual: Path  # target-language text, one sentence a line
    overrides: Sequence[str] = ()
    reverse: Sequence[Path] = ()  # the reverse model (several: an ensemble); none: trained
    reverse_overrides: Sequence[str] = ()  # the trained reverse run's, after `overrides`
    decoding: Decoding = field(default_factory=Decoding)
    tag: str | None = None  # put before every synthetic source
    real_factor: float = 1.0
    synthetic_factor: float = 1.0


@dataclass(frozen=True)
class Distillation:
    """What `nmt-pipeline distill` runs; `overrides` are the student's run."""

    work: Path
    teacher: Sequence[Sequence[Path]]  # members of an ensemble, each an average of its files
    overrides: Sequence[str] = ()
    decoding: Decoding = field(default_factory=Decoding)
    references_factor: float | None = None  # None: the distilled pairs alone
    distilled_factor: float = 1.0


def backtranslate(spec: BackTranslation) -> Path:
    """Run (or reuse) every stage; returns the forward model's best checkpoint."""
    checks.positive_factor("--real-factor", spec.real_factor)
    checks.positive_factor("--synthetic-factor", spec.synthetic_factor)
    forward = compose_run(spec.overrides)
    check_stage(forward)
    data = data_config(forward)
    src, tgt = data.src_lang, data.tgt_lang
    real = OmegaConf.to_container(data.corpus, resolve=True)
    pairs = instantiate(data.corpus).stream("train", src, tgt)
    checks.check_monolingual(spec.monolingual, tgt, src, pairs)
    reverse = list(spec.reverse)
    for path in reverse:
        read_checkpoint(path)  # refused (CheckpointError) before any stage runs
    if not reverse:
        swapped = [f"data.src_lang={tgt}", f"data.tgt_lang={src}", *spec.reverse_overrides]
        backward = compose_run([*spec.overrides, *swapped])
        check_stage(backward)
        reverse = [train_stage(spec.work, "reverse", backward)[0]]
    members = [[path] for path in reverse]
    synthetic, _ = translate_stage(
        spec.work, "backtranslate", members, spec.monolingual, spec.decoding
    )
    folder = pair_stage(spec.work, "synthetic", synthetic, spec.monolingual, (src, tgt), spec.tag)
    corpus = mixture(
        {
            "real": (real, spec.real_factor),
            "synthetic": (text_corpus(folder), spec.synthetic_factor),
        },
        eval_corpus="real",
        seed=forward.seed,
    )
    inputs = pair_files(folder, (src, tgt))
    return train_stage(spec.work, "train", compose_run(spec.overrides, corpus), inputs)[0]


def distill(spec: Distillation) -> Path:
    """Run (or reuse) every stage; returns the student's best checkpoint."""
    checks.positive_factor("--distilled-factor", spec.distilled_factor)
    if spec.references_factor is not None:
        checks.positive_factor("--references-factor", spec.references_factor)
    student = compose_run(spec.overrides)
    check_stage(student)
    data = data_config(student)
    src, tgt = data.src_lang, data.tgt_lang
    references = OmegaConf.to_container(data.corpus, resolve=True)
    corpus = instantiate(data.corpus)
    first = spec.teacher[0][0]
    vocabulary = read_checkpoint(first)["tokenizer"]
    for path in (p for member in spec.teacher for p in member):
        if (
            read_checkpoint(path)["tokenizer"] != vocabulary
        ):  # averaged or ensembled: one vocabulary
            raise ConfigError(
                f"--teacher {path} has another vocabulary than {first}: average or ensemble "
                "models trained with one tokenizer"
            )
    tokenizer = tokenizer_from_str(vocabulary)
    sources = (s for s, _ in corpus.stream("train", src, tgt))
    checks.check_teacher_vocabulary(str(first), tokenizer, sources)
    source_file = _source_stage(spec.work, corpus, src, tgt)
    distilled, _ = translate_stage(spec.work, "distill", spec.teacher, source_file, spec.decoding)
    folder = pair_stage(spec.work, "distilled", source_file, distilled, (src, tgt), None)
    train = text_corpus(folder)
    if spec.references_factor is None:
        corpus_cfg = train_replaced(train, references)
    else:
        parts = {
            "references": (references, spec.references_factor),
            "distilled": (train, spec.distilled_factor),
        }
        corpus_cfg = mixture(parts, eval_corpus="references", seed=student.seed)
    inputs = pair_files(folder, (src, tgt))
    return train_stage(spec.work, "train", compose_run(spec.overrides, corpus_cfg), inputs)[0]


def _source_stage(work: Path, corpus: Corpus, src: str, tgt: str) -> Path:
    """The training source side as a file, keyed by the corpus's fingerprint."""
    stage = Stage(work, "source", stage_key({"corpus": corpus.fingerprint("train", src, tgt)}))
    path = stage.folder / f"train.{src}"
    if stage.start():
        with atomic_open(path, "w", encoding="utf-8") as f:
            for source, _ in corpus.stream("train", src, tgt):
                f.write(source + "\n")
        stage.finish({"source": str(path)})
    return path
