"""A translation stage: a model (a checkpoint, an average, an ensemble) translates a text file.

The output is written atomically, whole: an interrupted stage leaves no partial file, and its
next run translates again.
"""

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from transformer_nmt.data.bitext import iter_lines
from transformer_nmt.data.progress import progress
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.inference.translator import Translator
from transformer_nmt.pipelines.stages import Stage, stage_key
from transformer_nmt.runtime.atomic import atomic_open


@dataclass(frozen=True)
class Decoding:
    """How a stage translates: beam search, or sampling when `sampling` is given."""

    beam_size: int = 4
    alpha: float = 0.6
    max_len_b: int = 50
    max_tokens: int | None = 4096  # token batches, as training batches
    sampling: Sampling | None = None
    shards: int = 1  # processes, each a share of the input (shards.py)
    device: str = "cpu"


# An ensemble's members, each the average of its checkpoints (one checkpoint: itself).
Members = Sequence[Sequence[Path]]


def load_model(members: Members, device: str = "cpu") -> Translator:
    """One member (a checkpoint, or the average of several), or an ensemble of them."""
    if len(members) == 1:
        return Translator.from_checkpoint(list(members[0]), device=device)
    return Translator.from_ensemble([list(m) for m in members], device=device)


def translate_stage(
    work: Path,
    name: str,
    members: Members,
    source: Path,
    decoding: Decoding,
) -> tuple[Path, bool]:
    """Translate `source` line by line, or reuse the output; returns (output, whether it ran)."""
    settings = {"decoding": asdict(decoding), "members": [len(m) for m in members]}
    stage = Stage(work, name, stage_key(settings, [*(c for m in members for c in m), source]))
    output = stage.folder / "output.txt"
    runs = stage.start()
    if runs:
        lines = [line.rstrip("\n") for line in iter_lines(source)]
        translations = translate(members, lines, decoding)  # one line each (Translator)
        with atomic_open(output, "w", encoding="utf-8") as f:
            # A bar on a terminal, a log line every 30 s off one: a corpus may take hours.
            for translation in progress(
                translations, desc=f"Stage {name}", total=len(lines), unit=" sentences"
            ):
                f.write(translation + "\n")
        stage.finish({"model": [[str(c) for c in m] for m in members], "source": str(source)})
    return output, runs


def translate(members: Members, lines: list[str], decoding: Decoding) -> Iterator[str]:
    """Each line's translation (its first sample when sampling), in input order."""
    options = dict(
        beam_size=decoding.beam_size,
        alpha=decoding.alpha,
        max_len_b=decoding.max_len_b,
        max_tokens=decoding.max_tokens,
        sampling=decoding.sampling,
    )
    if decoding.shards > 1:
        from transformer_nmt.inference.shards import translate_sharded

        make = partial(_shard_model, tuple(tuple(m) for m in members))
        devices = [decoding.device] * decoding.shards
        results = translate_sharded(make, devices, lines, options)
    else:
        results = load_model(members, decoding.device).stream(lines, **options)
    for hypotheses in results:
        yield hypotheses[0][0]


def _shard_model(members: tuple[tuple[Path, ...], ...], device: str) -> Translator:
    return load_model(members, device)
