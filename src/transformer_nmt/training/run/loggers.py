"""Experiment loggers: W&B that works with or without an account, one W&B run per run folder."""

import contextlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.loggers import Logger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig

from transformer_nmt.runtime.atomic import write_atomically
from transformer_nmt.runtime.wandb_run import (
    RUN_FILE,
    WandbRunError,
    folder_run,
    save_run,
    wandb_mode,
)
from transformer_nmt.training.callbacks.checkpoint_policy import CheckpointPolicy
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.run.run_lock import is_global_rank_zero
from transformer_nmt.training.run.sweeps import is_multirun
from transformer_nmt.training.step.val_metrics import mode

if TYPE_CHECKING:
    import wandb

log = logging.getLogger(__name__)


# Command-line overrides that say where files go, not what the experiment is.
UNNAMED_OVERRIDES = ("paths.", "hydra.", "ckpt_path=")
# Keys that once chose the W&B run: the run folder does (`runtime/wandb_run.py`).
RETIRED_KEYS = ("continue_run", "ckpt_path", "id", "resume")
# The rows a start logged after W&B's service had gone, which the next start logs first.
PENDING_FILE = "wandb_pending.json"


def wandb_logger(
    save_dir: str,
    project: str,
    name: str | None = None,
    tags: list[str] | None = None,
    log_model: bool | str = False,
    mode: str | None = None,
    finish_timeout: float | None = None,
    run: Mapping[str, Any] | None = None,
    **kwargs,
) -> "FolderWandbLogger":
    """A WandbLogger that logs online when W&B credentials exist, offline otherwise, to the one
    W&B run of its run folder `save_dir`.

    `mode`, else WANDB_MODE, when set, decides. Offline runs land in `save_dir/wandb/offline-run-*`
    and can be uploaded later with `wandb sync <that folder>`. Without a `name`, the run is named
    after the command-line overrides (e.g. "experiment=multi30k_de_en model.dropout=0.3"), each
    of which is also added to `tags`. `run` is the W&B run the plan chose (`folder_run`: the
    folder's, the resumed checkpoint's, or a new one; the folder's without a plan); it is written
    to `save_dir/wandb_run.json` before W&B starts. `log_model` true or "all" uploads the best
    checkpoint and `last.ckpt` as Artifacts (the checkpoint policy tells the logger of those
    only), at the end of training or as they are saved. `finish_timeout` bounds, in seconds, how
    long the run's end waits for uploads (None: until they are done); what is not sent by then
    stays on disk.
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
    run = dict(run) if run is not None else folder_run(save_dir, project, None)
    if mode != "disabled" and is_global_rank_zero():
        save_run(save_dir, run["id"], project, run["step"])
        after = f", on after step {run['step']}" if run["step"] >= 0 else ""
        log.info("W&B run %s of project %s (%s)%s", run["id"], project, RUN_FILE, after)
    # The mode goes to wandb.init itself: Lightning's `offline=True` sets WANDB_MODE=dryrun, which
    # current wandb releases no longer honour (they then ask for a login). Lightning passes
    # resume="allow": the id continues a run that exists and starts one that does not.
    return FolderWandbLogger(
        save_dir=save_dir,
        project=project,
        mode=mode,
        name=name,
        tags=tags,
        id=run["id"],
        log_model=log_model,
        settings=_finish_settings(finish_timeout),
        logged_step=run["step"] if mode != "disabled" else None,
        **kwargs,
    )


class FolderWandbLogger(WandbLogger):
    """A WandbLogger that logs each step once over every start of its run folder.

    Each new step is recorded in `wandb_run.json` before W&B gets it. A restart from a
    `last.ckpt` older than the last step logged (after a kill or a crash) trains those steps
    again: they are not logged again, so that the curve goes on without a step twice.

    W&B's service process ends at a SIGTERM, which SLURM sends to every process of a job it
    requeues or pre-empts: the rows logged after that are kept in `wandb_pending.json`, and the
    next start logs them first, so that the stop leaves no hole in the curve.

    Args:
        logged_step: the last step the folder's earlier starts logged (-1: none); None records
            nothing (W&B disabled).
    """

    def __init__(self, *args: Any, logged_step: int | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._logged_before = self._logged = logged_step
        self._replay_said = False
        self._pending: list[list] | None = None  # [step, metrics] W&B did not take; None: unread

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if self._logged is None or step is None:
            self._log(metrics, step)
            return
        if self._pending is None:
            self._log_pending()
        if step <= self._logged_before:
            if not self._replay_said:
                log.info(
                    "W&B run %s holds steps up to %d already: the steps trained again up to "
                    "there are not logged twice",
                    self._id,
                    self._logged_before,
                )
                self._replay_said = True
            return
        if step > self._logged:
            save_run(self.save_dir, self._id, self._project, step)
            self._logged = step
        self._log(metrics, step)

    def _log(self, metrics: Mapping[str, float], step: int | None) -> None:
        """W&B gets the row, or, once its service is gone, `wandb_pending.json` keeps it."""
        if not self._pending:
            try:
                super().log_metrics(metrics, step)
                return
            except ConnectionError as error:
                log.warning(
                    "W&B's service process is gone (%r; SLURM's SIGTERM reaches every process of "
                    "a job): the rows from step %s on are kept in %s for the next start to log",
                    error,
                    step,
                    Path(self.save_dir) / PENDING_FILE,
                )
        if step is None or self._logged is None:
            return
        numbers = {k: v for k, v in metrics.items() if isinstance(v, int | float)}
        self._pending = [*(self._pending or []), [step, numbers]]
        write_atomically(Path(self.save_dir) / PENDING_FILE, json.dumps(self._pending))

    def _log_pending(self) -> None:
        """The rows an earlier start kept while W&B's service was gone, logged first."""
        path = Path(self.save_dir) / PENDING_FILE
        rows = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
        self._pending = []
        for step, metrics in rows:
            self._log(metrics, step)
        if not self._pending:
            path.unlink(missing_ok=True)


def _finish_settings(finish_timeout: float | None) -> "wandb.Settings":
    """W&B's own bound on a run's end: its service gives the uploads up and closes the run, where
    a thread with a deadline would leave `finish` half done under wandb's exit hook."""
    import wandb  # imported by the runs that log to W&B only

    # Raising is how `finish_wandb_runs` learns that the bound was reached; 0 is W&B's "no bound".
    return wandb.Settings(finish_timeout=finish_timeout or 0, finish_timeout_raises=True)


def wandb_problems(cfg: DictConfig, resume: ResumePoint | None = None) -> list[str]:
    """What W&B cannot do as configured, each named by its key; [] without a W&B logger.

    `resume` is the run's resume point (`cfg.ckpt_path`'s if not given): a resume continues the
    W&B run of its checkpoint's folder, which must be of the configured project.
    """
    config = (cfg.get("logger") or {}).get("wandb")
    if config is None:
        return []
    problems = [
        f"logger.wandb.{key} is not read any more: a run folder logs to one W&B run, named in its "
        f"{RUN_FILE}, which every start in the folder and every resume from its checkpoints "
        f"continue; remove logger.wandb.{key}"
        for key in RETIRED_KEYS
        if key in config
    ]
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
    try:
        planned_wandb_run(cfg, resume.path if resume else cfg.get("ckpt_path"))
    except WandbRunError as e:
        problems.append(str(e))
    return problems


def planned_wandb_run(cfg: DictConfig, resume_from: str | None) -> dict[str, Any] | None:
    """The W&B run this run logs to (`folder_run`), resuming from `resume_from`; None without a
    W&B logger."""
    config = (cfg.get("logger") or {}).get("wandb")
    return None if config is None else folder_run(config.save_dir, config.project, resume_from)


@rank_zero_only
def start_wandb_runs(loggers: list[Logger], monitor: str | None = "val/bleu") -> None:
    """Summarise the monitored metric by its best (the maximum of `val/bleu`, the minimum of
    `val/ter`), so that sweeps optimise the best value, not the last."""
    best = mode(monitor) if monitor else None
    if best is None:
        return
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            # Lightning plots every metric against trainer/global_step; keep that for this one.
            logger.experiment.define_metric(
                monitor, step_metric="trainer/global_step", summary=best
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
            try:
                _finish(logger, checkpoint, exit_code)
            except ConnectionError as error:
                log.warning(
                    "W&B's service process is gone (%r): this start's W&B run ends without it; "
                    "what it had taken is in %s",
                    error,
                    logger.experiment.settings.sync_dir,
                )
                _forget_service()


def _forget_service() -> None:
    """Drop the connection to W&B's dead service and its run, so that no exit hook tries them
    again with a traceback, and a later run in this process (a sweep) starts anew."""
    import wandb
    from wandb.sdk.lib import module

    with contextlib.suppress(ConnectionError):
        wandb.teardown()
    # What `finish` does last, which the lost connection cut short: else Lightning's next
    # WandbLogger would take the dead run as one in progress.
    module.unset_globals()


def _finish(logger: WandbLogger, checkpoint: CheckpointPolicy | None, exit_code: int) -> None:
    """The best checkpoint into the summary, then the run closed with the exit status."""
    if checkpoint is not None and checkpoint.best_model_score is not None:
        logger.experiment.summary.update(
            {
                f"best/{checkpoint.monitor}": float(checkpoint.best_model_score),
                "best/checkpoint": checkpoint.best_model_path,
            }
        )
    settings = logger.experiment.settings
    # Flushes an offline run to disk; a later run in the same process (a sweep) then starts a
    # fresh W&B run.
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
