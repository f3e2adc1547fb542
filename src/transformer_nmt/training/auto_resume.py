"""A run started again in its own run folder goes on from its `last.ckpt`, with no `ckpt_path`.

A requeued cluster job, or the same command run again after a pre-emption, finds the state the
first start left: the SLURM recipe keys the run folder on the job id for this
(README.md, "Training on a cluster").
"""

import logging
from pathlib import Path

from omegaconf import DictConfig

log = logging.getLogger(__name__)


def run_folder_checkpoint(cfg: DictConfig) -> Path:
    """Where this run's `last.ckpt` lives: the checkpoint policy's folder."""
    policy = (cfg.get("callbacks") or {}).get("checkpoints")
    folder = policy.dirpath if policy else Path(cfg.paths.output_dir) / "checkpoints"
    return Path(folder) / "last.ckpt"


def resume_from_run_folder(cfg: DictConfig) -> Path | None:
    """Set `ckpt_path` to the run folder's `last.ckpt` when there is one and none is given.

    Returns the checkpoint found, or None (a `ckpt_path` given, or a fresh folder).
    `check_config` then refuses it, before anything is written, if the config does not
    continue its training (another model).
    """
    if cfg.get("ckpt_path") is not None:
        return None
    path = run_folder_checkpoint(cfg)
    if not path.is_file():
        return None
    cfg.ckpt_path = str(path)
    log.info("Resuming from %s, which this run folder holds (ckpt_path=%s)", path, path)
    return path


def found_in_run_folder_hint(path: Path) -> str:
    """What to do when the run folder's own checkpoint does not fit the config."""
    return (
        f"(ckpt_path was not given: {path} is this run folder's, resumed from automatically; "
        "run the command that started it, or start this run in a fresh folder: "
        "hydra.run.dir=<another folder>)"
    )
