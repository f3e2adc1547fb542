"""Paired significance tests between systems: sacreBLEU's own, its numbers unchanged.

What `sacrebleu REF -i BASELINE SYS... -m bleu chrf ter --paired-bs` (or `--paired-ar`) computes
and prints, from Python, with chrF++ (the command line's `-m chrf --chrf-word-order 2`) beside:
the same metrics, `PairedTest`, seed (`SACREBLEU_SEED`, 12345 unless set) and table. Bootstrap
resampling gives each system's mean and 95% confidence interval and a p-value against the
baseline (the first system); approximate randomization gives p-values.
"""

import io
from argparse import Namespace
from contextlib import redirect_stdout
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest
from sacrebleu.utils import Color, print_results_table

TESTS = {"bs": "paired bootstrap resampling", "ar": "approximate randomization"}


def paired_test(
    systems: list[tuple[str, list[str]]], references: list[str], test: str, n: int = 0
) -> tuple[dict[str, str], dict[str, list]]:
    """sacreBLEU's signatures and results of BLEU, chrF, chrF++ and TER; the first system is the
    baseline.

    Args:
        systems: (name, one hypothesis a reference) each; at least two.
        test: "bs" (1000 resamples by default) or "ar" (10000 trials by default).
        n: resamples or trials; 0 takes sacreBLEU's default.
    """
    if test not in TESTS:
        raise ValueError(f"the paired test is one of {sorted(TESTS)}, got {test!r}")
    if len(systems) < 2:
        raise ValueError("a paired test compares at least two systems, a baseline first")
    for name, hypotheses in systems:
        if len(hypotheses) != len(references):
            raise ValueError(f"{name}: {len(hypotheses)} lines for {len(references)} references")
    # As sacreBLEU's command line: the baseline so named, references cached in the metrics.
    named = [(f"Baseline: {systems[0][0]}", systems[0][1]), *systems[1:]]
    metrics = {
        "BLEU": BLEU(references=[references]),
        "CHRF": CHRF(references=[references]),
        "CHRF++": CHRF(word_order=2, references=[references]),
        "TER": TER(references=[references]),
    }
    signatures, results = PairedTest(named, metrics, None, test_type=test, n_samples=n)()
    return {name: sig.format() for name, sig in signatures.items()}, results


def table(signatures: dict[str, str], results: dict[str, list], test: str, n: int) -> str:
    """The text sacreBLEU's command line prints for these results, without colours."""
    samples = n or PairedTest._DEFAULT_SAMPLES[test]
    args = Namespace(format="text", width=1, paired_bs=test == "bs", paired_ar=test == "ar")
    args.paired_bs_n = args.paired_ar_n = samples
    colours, Color.ENABLE_COLORS = Color.ENABLE_COLORS, False
    try:
        with redirect_stdout(io.StringIO()) as out:
            print_results_table({k: list(v) for k, v in results.items()}, signatures, args)
    finally:
        Color.ENABLE_COLORS = colours
    return out.getvalue()


def as_records(results: dict[str, list]) -> list[dict[str, Any]]:
    """One JSON-ready record a system: its name and, per metric, score, mean, ci, p_value."""
    names = results["System"]
    metrics = [key for key in results if key != "System"]
    return [
        {"system": name} | {metric: _plain(vars(results[metric][i])) for metric in metrics}
        for i, name in enumerate(names)
    ]


def _plain(values: dict[str, Any]) -> dict[str, float | None]:
    """numpy floats (sacreBLEU's means and intervals) as Python floats, for JSON."""
    return {key: None if value is None else float(value) for key, value in values.items()}
