"""What a run reports to a Hydra sweeper: its optimised metric, or a failure when it diverged."""

import logging
import math

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.step.val_metrics import direction as metric_direction

log = logging.getLogger(__name__)


def is_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def study_direction(metric: str | None, given: str | None) -> str:
    """Which way a sweep optimises `metric` (`optimized_metric`): `given` (`optimized_direction`)
    or, where it is null, the metric's own; ValueError where `given` contradicts the metric's."""
    own = metric_direction(metric) if metric else None
    if given is None:
        if own is None and metric:
            raise ValueError(
                f"optimized_direction=null: which way is better is not known for "
                f"optimized_metric={metric}; give optimized_direction=maximize or minimize"
            )
        return own or "maximize"
    if given not in ("maximize", "minimize"):
        raise ValueError(f"optimized_direction={given}: maximize, minimize, or null")
    if own is not None and given != own:
        raise ValueError(
            f"optimized_direction={given} contradicts optimized_metric={metric}, which is "
            f"better {'lower' if own == 'minimize' else 'higher'}: give "
            f"optimized_direction={own}, or null to take the metric's own"
        )
    return given


def optimized_metric(cfg: DictConfig, metrics: dict[str, float]) -> float | None:
    """The value of `cfg.optimized_metric` that a sweeper optimises: its best, else its last.

    None when no metric is named, or when the run never logged it (it ended before its first
    validation): a warning says so, the run still succeeds, and an Optuna sweep records the trial
    as failed. The best is that of a checkpoint callback monitoring the metric, in its `mode`:
    the metric's own, as the sweep's direction is (`study_direction`).
    """
    name = cfg.get("optimized_metric")
    if not name:
        return None
    value = metrics.get(f"best/{name}", metrics.get(name))
    if value is None:
        log.warning(
            "optimized_metric=%s is missing: the run ended before its first validation "
            "(logged: %s); lower trainer.val_check_interval or train longer to get it",
            name,
            ", ".join(sorted(metrics)) or "nothing",
        )
        return None
    direction = cfg.get("optimized_direction") or metric_direction(name)
    log.info("Optimized metric %s (%s): %s", name, direction, value)
    return value


def best_scores(trainer: L.Trainer, resume: ResumePoint) -> dict[str, float]:
    """`best/<metric>` of each checkpoint callback that monitors one, over the whole run.

    A resumed run counts the best its checkpoint recorded: Lightning restores it only when the
    run writes to the same folder, and a resumed run that stops before validating again would
    otherwise report nothing.
    """
    restored = resume.best_scores
    best = {}
    for checkpoint in trainer.checkpoint_callbacks:
        if not checkpoint.monitor:
            continue
        scores = [float(s) for s in (checkpoint.best_model_score,) if s is not None]
        if checkpoint.monitor in restored:
            scores.append(restored[checkpoint.monitor])
        if scores:
            pick = max if checkpoint.mode == "max" else min
            best[f"best/{checkpoint.monitor}"] = pick(scores)
    return best


def raise_if_diverged(metrics: dict[str, float]) -> None:
    """A NaN or infinite training loss fails the run (a sweeper records it as a failed trial).

    Raising rather than returning NaN: the run fails with its reason in its train.log and W&B
    run, whichever sweeper ran it; our Optuna sweeper records the error as a failed trial.
    """
    loss = metrics.get("train/loss")
    if loss is not None and not math.isfinite(loss):
        raise FloatingPointError(f"training diverged: train/loss={loss}")
