"""What a run's CSV logger wrote, read back for the training tests."""

import csv
from pathlib import Path


def logged(run_dir: Path, metric: str) -> dict[int, float]:
    """`metric` by update, from the metrics.csv of the CSV logger in `run_dir`."""
    (metrics,) = run_dir.glob("csv/version_*/metrics.csv")
    with metrics.open() as f:
        return {int(r["step"]): float(r[metric]) for r in csv.DictReader(f) if r[metric]}
