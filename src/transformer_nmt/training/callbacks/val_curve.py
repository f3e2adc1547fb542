"""A run's validation curve as a CSV file in its folder: compare runs and sweep trials by curve."""

import csv
import io
import time
from pathlib import Path
from typing import Any

import lightning as L

from transformer_nmt.runtime.atomic import write_atomically


class ValCurve(L.Callback):
    """Appends a row to `<path>` after every validation: step, epoch, minutes, val_seconds, then
    the metrics.

    `minutes` is the wall time since the fit started, validation included, carried over a
    resume through the checkpoint, so a resumed run's rows go on where its checkpoint was taken;
    they are appended to the same file when the run resumes in the same folder. `val_seconds` is
    the wall time of that validation itself: their sum is what a run spent validating. A metric not
    logged is left empty. Skipped during Lightning's sanity check, and on ranks other than zero.

    Args:
        metrics: the logged metrics to record, e.g. `val/bleu`.
        path: the CSV file; `<trainer.default_root_dir>/val_curve.csv` if None.
    """

    def __init__(
        self, metrics: tuple[str, ...] = ("val/bleu", "val/loss"), path: str | None = None
    ) -> None:
        self.metrics = list(metrics)
        self.path = path
        self._minutes_before = 0.0  # of the runs this one resumes
        self._start: float | None = None
        self._validation_start = 0.0

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.monotonic()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validation_start = time.monotonic()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        seconds = time.monotonic() - self._validation_start
        logged = trainer.callback_metrics
        row = {
            "step": trainer.global_step,
            "epoch": trainer.current_epoch,
            "minutes": f"{self._minutes():.2f}",
            "val_seconds": f"{seconds:.1f}",
            **{m: f"{float(logged[m]):.4f}" if m in logged else "" for m in self.metrics},
        }
        path = Path(self.path or Path(trainer.default_root_dir) / "val_curve.csv")
        self._append(path, row)

    def state_dict(self) -> dict[str, Any]:
        return {"minutes": self._minutes()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._minutes_before = state_dict["minutes"]

    def _minutes(self) -> float:
        running = time.monotonic() - self._start if self._start is not None else 0.0
        return self._minutes_before + running / 60

    def _append(self, path: Path, row: dict[str, Any]) -> None:
        """Append by rewriting the file atomically: a kill mid-write cuts no row short.

        A file already there keeps its own columns (one written before a column was added stays
        a well-formed table): the row fills those it has and leaves the others empty.
        """
        old = path.read_bytes() if path.exists() else b""
        header = next(csv.reader(io.StringIO(old.decode("utf-8")))) if old else list(row)
        text = io.StringIO()
        writer = csv.DictWriter(text, header, restval="", extrasaction="ignore")
        if not old:
            writer.writeheader()
        writer.writerow(row)
        write_atomically(path, old + text.getvalue().encode("utf-8"))
