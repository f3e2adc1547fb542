"""Experiment loggers: W&B that works with or without an account."""

import logging
import os
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import Logger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, open_dict

from transformer_nmt.training.sweeps import is_multirun

log = logging.getLogger(__name__)


# Command-line overrides that say where files go, not what the experiment is.
UNNAMED_OVERRIDES = ("paths.", "hydra.", "ckpt_path=")


def wandb_logger(
    save_dir: str, project: str, name: str | None = None, tags: list[str] | None = None, **kwargs
) -> WandbLogger:
    """A WandbLogger that logs online when W&B credentials exist, offline otherwise.

    WANDB_MODE, when set, decides. Offline runs land in `save_dir/wandb/offline-run-*` and can
    be uploaded later with `wandb sync <that folder>`. Without a `name`, the run is named after
    the command-line overrides (e.g. "experiment=multi30k_de_en model.dropout=0.3"), each of which
    is also added to `tags`.
    """
    mode = os.environ.get("WANDB_MODE")
    if mode is None:
        mode = "online" if _has_credentials() else "offline"
        if mode == "offline":
            log.info(
                "W&B: no credentials found, logging offline under %s/wandb; "
                "upload later with `wandb sync <run folder>` (or run `wandb login` first).",
                save_dir,
            )
    overrides = _experiment_overrides()
    name = name or " ".join(overrides) or None
    # W&B rejects tags longer than 64 characters.
    tags = list(dict.fromkeys([*(tags or []), *(o[:64] for o in overrides)]))
    # The mode goes to wandb.init itself: Lightning's `offline=True` sets WANDB_MODE=dryrun, which
    # current wandb releases no longer honour (they then ask for a login).
    return WandbLogger(
        save_dir=save_dir, project=project, mode=mode, name=name, tags=tags, **kwargs
    )


@rank_zero_only
def start_wandb_runs(loggers: list[Logger]) -> None:
    """Summarise `val/bleu` by its maximum, so that sweeps optimise the best value, not the last."""
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            # Lightning plots every metric against trainer/global_step; keep that for this one.
            logger.experiment.define_metric(
                "val/bleu", step_metric="trainer/global_step", summary="max"
            )


@rank_zero_only
def finish_wandb_runs(
    loggers: list[Logger], checkpoint: ModelCheckpoint | None, exit_code: int = 0
) -> None:
    """Record the best checkpoint's score and path in the run summary, then close the run.

    A non-zero `exit_code` marks the run as failed in W&B.
    """
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            if checkpoint is not None and checkpoint.best_model_score is not None:
                logger.experiment.summary.update(
                    {
                        f"best/{checkpoint.monitor}": float(checkpoint.best_model_score),
                        "best/checkpoint": checkpoint.best_model_path,
                    }
                )
            # Flushes an offline run to disk; a later run in the same process (a sweep) then
            # starts a fresh W&B run.
            logger.experiment.finish(exit_code=exit_code)


def group_wandb_runs_by_sweep(cfg: DictConfig) -> None:
    """In a Hydra multirun, group every trial's W&B run under the sweep, e.g. `toy/<sweep>`.

    An explicit `logger.wandb.group` wins. Done here rather than by interpolation in the YAML:
    `hydra.sweep.dir` is set in single runs too, which should stay ungrouped.
    """
    wandb = (cfg.get("logger") or {}).get("wandb")
    if wandb is None or wandb.get("group") is not None or not is_multirun():
        return
    with open_dict(wandb):
        wandb.group = f"{cfg.task_name}/{Path(HydraConfig.get().sweep.dir).name}"


def _experiment_overrides() -> list[str]:
    """Hydra's command-line overrides, without those that only place files; [] outside Hydra."""
    if not HydraConfig.initialized():
        return []
    overrides = HydraConfig.get().overrides.task
    return [o for o in overrides if not o.lstrip("+~").startswith(UNNAMED_OVERRIDES)]


def _has_credentials() -> bool:
    import wandb

    try:
        return wandb.login(prompt=False, verify=False)
    except wandb.errors.UsageError:  # raised instead of False when there is no terminal
        return False
