"""Test-only: a logger whose start fails on global rank 0 alone, after the run plan is handed over,
as W&B's can (a service that does not start, a folder it cannot write)."""

from lightning.pytorch.loggers import CSVLogger

from transformer_nmt.training.run.run_lock import is_global_rank_zero

LOGGER_FAULT = "the logger's service did not start (injected)"


def fails_on_rank_0(save_dir: str) -> CSVLogger:
    """A CSVLogger in save_dir, but RuntimeError on global rank 0."""
    if is_global_rank_zero():
        raise RuntimeError(LOGGER_FAULT)
    return CSVLogger(save_dir)
