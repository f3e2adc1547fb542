"""Test-only: a logger whose start fails on one global rank alone, after the run plan is handed
over, as W&B's can (a service that does not start, a folder it cannot write)."""

from lightning.pytorch.loggers import CSVLogger

from transformer_nmt.runtime.run_names import launcher_rank

LOGGER_FAULT = "the logger's service did not start (injected)"


def fails_on_rank(save_dir: str, rank: int) -> CSVLogger:
    """A CSVLogger in save_dir, but RuntimeError on global rank `rank` (as its launcher set it)."""
    if launcher_rank() == str(rank):
        raise RuntimeError(LOGGER_FAULT)
    return CSVLogger(save_dir)
