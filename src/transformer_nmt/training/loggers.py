"""Experiment loggers: W&B that works with or without an account, and follows a run's resumes."""

import logging
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.loggers import Logger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig

from transformer_nmt.runtime.wandb_run import WandbRunError, continued_run_id, save_run, wandb_mode
from transformer_nmt.training.callbacks.checkpoint_policy import CheckpointPolicy
from transformer_nmt.training.run_lock import is_global_rank_zero
from transformer_nmt.training.sweeps import is_multirun

if TYPE_CHECKING:
    import wandb

log = logging.getLogger(__name__)


# Command-line overrides that say where files go, not what the experiment is.
UNNAMED_OVERRIDES = ("paths.", "hydra.", "ckpt_path=")


def wandb_logger(
    save_dir: str,
    project: str,
    name: str | None = None,
    tags: list[str] | None = None,
    log_model: bool | str = False,
    ckpt_path: str | None = None,
    continue_run: bool = True,
    mode: str | None = None,
    finish_timeout: float | None = None,
    **kwargs,
) -> WandbLogger:
    """A WandbLogger that logs online when W&B credentials exist, offline otherwise.

    `mode`, else WANDB_MODE, when set, decides. Offline runs land in `save_dir/wandb/offline-run-*`
    and can be uploaded later with `wandb sync <that folder>`. Without a `name`, the run is named
    after the command-line overrides (e.g. "experiment=multi30k_de_en model.dropout=0.3"), each
    of which is also added to `tags`. A run resumed from `ckpt_path` continues the W&B run of the
    checkpoint's run folder (`wandb_run.py`) unless `continue_run` is false; the id is written to
    `save_dir`, for the next resume. `log_model` true or "all" uploads the best checkpoint and
    `last.ckpt` as Artifacts (the checkpoint policy tells the logger of those only), at the end of
    training or as they are saved. `finish_timeout` bounds, in seconds, how long the run's end waits
    for uploads (None: until they are done); what is not sent by then stays on disk.
    """
    chosen = mode or os.environ.get("WANDB_MODE")
    mode = wandb_mode(mode)
    if chosen is None and mode == "offline":
        log.info(
            "W&B: no credentials found, logging offline under %s/wandb; "
            "upload later with `wandb sync <run folder>` (or run `wandb login` first).",
            save_dir,
        )
    overrides = _experiment_overrides()
    name = name or " ".join(overrides) or None
    # W&B rejects tags longer than 64 characters.
    tags = list(dict.fromkeys([*(tags or []), *(o[:64] for o in overrides)]))
    continued = continued_run_id(ckpt_path, project) if continue_run else None
    # A new id is chosen here, not by wandb.init, so that it is saved before the run starts.
    run_id = kwargs.pop("id", None) or continued or secrets.token_hex(4)
    if mode != "disabled" and is_global_rank_zero():
        save_run(save_dir, run_id, project)
    # The mode goes to wandb.init itself: Lightning's `offline=True` sets WANDB_MODE=dryrun, which
    # current wandb releases no longer honour (they then ask for a login). Lightning passes
    # resume="allow": the id continues a run that exists and starts one that does not.
    return WandbLogger(
        save_dir=save_dir,
        project=project,
        mode=mode,
        name=name,
        tags=tags,
        id=run_id,
        log_model=log_model,
        settings=_finish_settings(finish_timeout),
        **kwargs,
    )


def _finish_settings(finish_timeout: float | None) -> "wandb.Settings":
    """W&B's own bound on a run's end: its service gives the uploads up and closes the run, where
    a thread with a deadline would leave `finish` half done under wandb's exit hook."""
    import wandb  # imported by the runs that log to W&B only

    # Raising is how `finish_wandb_runs` learns that the bound was reached; 0 is W&B's "no bound".
    return wandb.Settings(finish_timeout=finish_timeout or 0, finish_timeout_raises=True)


def wandb_problems(cfg: DictConfig) -> list[str]:
    """What W&B cannot do as configured, each named by its key; [] without a W&B logger."""
    config = (cfg.get("logger") or {}).get("wandb")
    if config is None:
        return []
    problems = []
    log_model = config.get("log_model", False)
    if log_model not in (False, True, "all"):
        problems.append(f"logger.wandb.log_model={log_model} must be false, true or all")
    finish_timeout = config.get("finish_timeout")
    if finish_timeout is not None and not finish_timeout > 0:
        problems.append(
            f"logger.wandb.finish_timeout={finish_timeout} must be a number of seconds > 0, "
            "or null to wait until every upload is done"
        )
    disabled_by = "logger.wandb.mode=disabled" if config.get("mode") else "WANDB_MODE=disabled"
    if log_model and (config.get("mode") or os.environ.get("WANDB_MODE")) == "disabled":
        problems.append(
            f"logger.wandb.log_model={log_model} uploads checkpoints to W&B, but {disabled_by} "
            "turns W&B off: enable it (online or offline), or set logger.wandb.log_model=false"
        )
    if config.get("continue_run", True):
        try:
            continued_run_id(cfg.get("ckpt_path"), config.project)
        except WandbRunError as e:
            problems.append(str(e))
    return problems


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
    loggers: list[Logger], checkpoint: CheckpointPolicy | None, exit_code: int = 0
) -> None:
    """Record the best checkpoint's score and path in the run summary, then close the run.

    A non-zero `exit_code` marks the run as failed in W&B. Uploads still under way after the run's
    `finish_timeout` are left on disk, with a warning that says how to send them.
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
            settings = logger.experiment.settings
            # Flushes an offline run to disk; a later run in the same process (a sweep) then
            # starts a fresh W&B run.
            try:
                logger.experiment.finish(exit_code=exit_code)
            except TimeoutError:
                log.warning(
                    "W&B: uploads unfinished after logger.wandb.finish_timeout=%gs, left in %s; "
                    "send them with `wandb sync %s`",
                    settings.finish_timeout,
                    settings.sync_dir,
                    settings.sync_dir,
                )


def wandb_group(cfg: DictConfig) -> str | None:
    """The W&B group of this run: `logger.wandb.group`, else in a Hydra multirun the sweep's, e.g.
    `toy/<sweep>`, so that every trial's run is grouped under it; None without a W&B logger.

    Not an interpolation in the YAML: `hydra.sweep.dir` is set in single runs too, which should
    stay ungrouped.
    """
    config = (cfg.get("logger") or {}).get("wandb")
    if config is None:
        return None
    if config.get("group") is not None or not is_multirun():
        return config.get("group")
    return f"{cfg.task_name}/{Path(HydraConfig.get().sweep.dir).name}"


def _experiment_overrides() -> list[str]:
    """Hydra's command-line overrides, without those that only place files; [] outside Hydra."""
    if not HydraConfig.initialized():
        return []
    overrides = HydraConfig.get().overrides.task
    return [o for o in overrides if not o.lstrip("+~").startswith(UNNAMED_OVERRIDES)]
