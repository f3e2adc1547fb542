"""Experiment loggers: W&B that works with or without an account."""

import logging
import os

from lightning.pytorch.loggers import WandbLogger

log = logging.getLogger(__name__)


def wandb_logger(save_dir: str, project: str, **kwargs) -> WandbLogger:
    """A WandbLogger that logs online when W&B credentials exist, offline otherwise.

    WANDB_MODE, when set, decides. Offline runs land in `save_dir/wandb/offline-run-*` and can
    be uploaded later with `wandb sync <that folder>`.
    """
    import wandb

    mode = os.environ.get("WANDB_MODE")
    if mode is None:
        mode = "online" if _has_credentials() else "offline"
        if mode == "offline":
            log.info(
                "W&B: no credentials found, logging offline under %s/wandb; "
                "upload later with `wandb sync <run folder>` (or run `wandb login` first).",
                save_dir,
            )
    # The mode goes to wandb.init itself: Lightning's `offline=True` sets WANDB_MODE=dryrun, which
    # current wandb releases no longer honour (they then ask for a login).
    return WandbLogger(save_dir=save_dir, project=project, mode=mode, **kwargs)


def _has_credentials() -> bool:
    import wandb

    try:
        return wandb.login(prompt=False, verify=False)
    except wandb.errors.UsageError:  # raised instead of False when there is no terminal
        return False
