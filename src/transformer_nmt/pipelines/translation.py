"""A translation stage: a model (a checkpoint, an average, an ensemble) translates a text file.

The output is written in parts of PART_LINES lines, each atomically, then joined into one file
atomically: an interrupted stage leaves only whole parts, and its next run goes on after the last
of them, each line seeded by its index in the whole file as if nothing had stopped.
"""

import logging
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from itertools import islice
from pathlib import Path

from transformer_nmt.data.bitext import iter_lines
from transformer_nmt.data.progress import progress
from transformer_nmt.decoding.mbr import MBR
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.inference.translator import Translator
from transformer_nmt.pipelines.stages import Stage, stage_key
from transformer_nmt.runtime.atomic import atomic_open, write_atomically

log = logging.getLogger(__name__)

PARTS = "parts"  # the stage's folder of finished parts, gone once the output is whole
PART_LINES = 2048  # what a killed stage translates again, at most


@dataclass(frozen=True)
class Decoding:
    """How a stage translates: beam search, sampling when `sampling` is given, or minimum Bayes
    risk decoding (`nmt-translate --mbr`) when `mbr` is; all of it keys the stage's output."""

    beam_size: int = 4
    alpha: float = 0.6
    max_len_b: int = 50
    max_tokens: int | None = 4096  # token batches, as training batches
    sampling: Sampling | None = None
    shards: int = 1  # processes, each a share of the input (shards.py)
    device: str = "cpu"
    mbr: MBR | None = None

    def __post_init__(self) -> None:
        if self.sampling is not None and self.mbr is not None:
            raise ValueError("a stage samples or decodes with MBR (its own samples), not both")


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
        parts = stage.folder / PARTS
        for leftover in stage.folder.glob("**/.*.tmp"):  # a process killed mid-write left it
            leftover.unlink()
        done = _finished_parts(parts)
        first = min(done * PART_LINES, len(lines))
        if done:
            log.info("Stage %s: lines 1 to %d translated before; going on", name, first)
        # One line each (Translator), seeded by its index in the whole file.
        translations = translate(members, lines[first:], decoding, start=first)
        # A bar on a terminal, a log line every 30 s off one: a corpus may take hours.
        bar = progress(
            translations, desc=f"Stage {name}", total=len(lines) - first, unit=" sentences"
        )
        for k in range(done, -(-len(lines) // PART_LINES)):
            part = "".join(f"{translation}\n" for translation in islice(bar, PART_LINES))
            write_atomically(parts / f"{k:06d}.txt", part)
        with atomic_open(output, "w", encoding="utf-8") as f:
            for k in range(_finished_parts(parts)):
                f.write((parts / f"{k:06d}.txt").read_text(encoding="utf-8"))
        stage.finish(
            {
                "model": [[str(c) for c in m] for m in members],
                "source": str(source),
                "decoding": asdict(decoding),
            }
        )
        shutil.rmtree(parts, ignore_errors=True)
    return output, runs


def _finished_parts(parts: Path) -> int:
    """How many parts, from the first, are written."""
    k = 0
    while (parts / f"{k:06d}.txt").is_file():
        k += 1
    return k


def translate(
    members: Members, lines: list[str], decoding: Decoding, start: int = 0
) -> Iterator[str]:
    """Each line's translation (its first sample when sampling), in input order; start: the
    index of lines[0] in the whole input, which seeds its samples (MBR's too)."""
    options = dict(
        beam_size=decoding.beam_size,
        alpha=decoding.alpha,
        max_len_b=decoding.max_len_b,
        max_tokens=decoding.max_tokens,
        sampling=decoding.sampling,
        mbr=decoding.mbr,
    )
    if decoding.shards > 1:
        from transformer_nmt.inference.shards import translate_sharded

        make = partial(_shard_model, tuple(tuple(m) for m in members))
        devices = [decoding.device] * decoding.shards
        results = translate_sharded(make, devices, lines, options, first_index=start)
    else:
        results = load_model(members, decoding.device).stream(lines, start=start, **options)
    for hypotheses in results:
        yield hypotheses[0][0]


def _shard_model(members: tuple[tuple[Path, ...], ...], device: str) -> Translator:
    return load_model(members, device)
