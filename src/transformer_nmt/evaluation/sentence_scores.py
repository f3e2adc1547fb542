"""Per-sentence BLEU, chrF, chrF++ and TER (sacreBLEU's), for analysing a system line by line."""

import os
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF, TER

from transformer_nmt.runtime.atomic import write_atomically

COLUMNS = ("BLEU", "chrF", "chrF++", "TER")


def sentence_metrics() -> dict[str, BLEU | CHRF | TER]:
    """sacreBLEU's sentence-level metrics: BLEU with its effective order (as `sentence_bleu`),
    chrF2, chrF++ (word_order=2) and TER, each of default settings otherwise."""
    return {
        "BLEU": BLEU(effective_order=True),
        "chrF": CHRF(),
        "chrF++": CHRF(word_order=2),
        "TER": TER(),
    }


def sentence_scores(hypotheses: list[str], references: list[str]) -> list[dict[str, float]]:
    """Each hypothesis' scores against its reference, by COLUMNS."""
    metrics = sentence_metrics()
    return [
        {name: metric.sentence_score(h, [r]).score for name, metric in metrics.items()}
        for h, r in zip(hypotheses, references, strict=True)
    ]


def write_sentence_scores(
    path: str | os.PathLike, hypotheses: list[str], references: list[str]
) -> None:
    """A TSV of 'line<TAB>BLEU<TAB>chrF<TAB>chrF++<TAB>TER' (lines from 1) under a header."""
    rows = ["\t".join(("line", *COLUMNS))]
    for line, scores in enumerate(sentence_scores(hypotheses, references), start=1):
        rows.append("\t".join([str(line), *(f"{scores[name]:.4f}" for name in COLUMNS)]))
    write_atomically(Path(path), "\n".join(rows) + "\n")
