"""What a Hydra multirun needs from a training run: its metric, failures, W&B grouping, no DDP."""

import logging
import math
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


def optimized_metric(cfg: DictConfig, metrics: dict[str, float]) -> float | None:
    """The value of `cfg.optimized_metric` that a sweeper optimises: its best, else its last.

    None when no metric is named. The best is that of a checkpoint callback monitoring the metric,
    so its `mode` must agree with `optimized_direction`.
    """
    name = cfg.get("optimized_metric")
    if not name:
        return None
    value = metrics.get(f"best/{name}", metrics.get(name))
    if value is None:
        raise KeyError(f"optimized_metric={name} was not logged; logged: {sorted(metrics)}")
    log.info("Optimized metric %s (%s): %s", name, cfg.get("optimized_direction"), value)
    return value


def raise_if_diverged(metrics: dict[str, float]) -> None:
    """A NaN or infinite training loss fails the run (a sweeper records it as a failed trial).

    Raising rather than returning NaN: hydra-optuna-sweeper 1.3 with optuna 2.x aborts the whole
    sweep on a NaN return value, but records a raised exception as a failed trial.
    """
    loss = metrics.get("train/loss")
    if loss is not None and not math.isfinite(loss):
        raise FloatingPointError(f"training diverged: train/loss={loss}")


def group_wandb_runs_by_sweep(cfg: DictConfig) -> None:
    """In a Hydra multirun, group every trial's W&B run under the sweep, e.g. `toy/<sweep>`.

    An explicit `logger.wandb.group` wins. Done here rather than by interpolation in the YAML:
    `hydra.sweep.dir` is set in single runs too, which should stay ungrouped.
    """
    wandb = (cfg.get("logger") or {}).get("wandb")
    if wandb is None or wandb.get("group") is not None or not _is_multirun():
        return
    with open_dict(wandb):
        wandb.group = f"{cfg.task_name}/{Path(HydraConfig.get().sweep.dir).name}"


def _is_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def refuse_multirun_with_ddp(cfg: DictConfig) -> None:
    """Stop a Hydra sweep whose trials would run on several devices through re-launched ranks.

    `ddp` (and `auto` on several GPUs) re-runs the command line once per extra rank: under
    `--multirun` every rank would run the whole sweep, and with a sampling sweeper such as Optuna
    the ranks would silently train different hyperparameters.
    """
    if not _is_multirun():
        return
    devices = cfg.trainer.get("devices", 1)
    one_device = devices == 1 or (OmegaConf.is_list(devices) and len(devices) == 1)
    strategy = str(cfg.trainer.get("strategy", "auto"))
    if (one_device and cfg.trainer.get("num_nodes", 1) == 1) or "spawn" in strategy:
        return
    raise ValueError(
        f"Hydra multirun with trainer.strategy={strategy} on trainer.devices={devices} would run "
        "the sweep once per rank. Run one device per trial (trainer.devices=1), or keep several "
        "devices per trial with trainer.strategy=ddp_spawn."
    )
