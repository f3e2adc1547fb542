"""`train(cfg)`: what `python train.py` runs, callable in-process from tests and notebooks.

It reads as the list of its steps: plan the run (check the config, decide what it derives, on
global rank 0), build the data, model and module, build the loggers and trainer, fit, report.
Each step's details live in `training/`.
"""

import logging
import signal
from contextlib import ExitStack
from typing import Any

import lightning as L
from hydra.utils import get_class, instantiate
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.training.callbacks.checkpoint_policy import CheckpointPolicy
from transformer_nmt.training.callbacks.plan_record import PlanRecord
from transformer_nmt.training.callbacks.rng_states import RngStates
from transformer_nmt.training.callbacks.timed_cooldown import TimedCooldown
from transformer_nmt.training.fine_tuning.init_from import (
    KeepParentState,
    Parent,
    load_parent,
    parent_from_plan,
    resumed_parent,
)
from transformer_nmt.training.plan.config_checks import check_resume
from transformer_nmt.training.plan.plan_sharing import (
    agreed_plan,
    refusals_handed_over,
    start_handed_over,
    withdraw_plan,
)
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.plan.run_config import write_run_config
from transformer_nmt.training.plan.run_plan import RunPlan, plan_run, resume_point
from transformer_nmt.training.run.ddp import ddp_strategy
from transformer_nmt.training.run.loggers import (
    finish_wandb_runs,
    start_wandb_runs,
    wandb_group,
)
from transformer_nmt.training.run.run_lock import RunLock, is_global_rank_zero
from transformer_nmt.training.run.slurm_requeue import (
    REQUEUE_SIGNAL,
    log_slurm_job,
    requeue_this_job,
)
from transformer_nmt.training.run.stop import (
    SIGNALS,
    AgreedStop,
    EarlyStop,
    Stopped,
    exit_status,
    raise_if_stopped,
    warn_if_torchrun_cuts_the_stop,
)
from transformer_nmt.training.run.sweeps import best_scores, raise_if_diverged
from transformer_nmt.training.run.time_budget import TimeBudget
from transformer_nmt.training.step.module import TranslationModule

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict[str, float]:
    """Builds data, model, module, loggers and trainer from the config, then fits.

    Returns the final metrics (e.g. `val/bleu`) as floats, and as `best/<name>` the best value
    of each metric a checkpoint callback monitors. Raises `FloatingPointError` if the training
    loss became non-finite, so that a sweep records the trial as failed, and `Stopped` (a
    `SystemExit`) once SIGTERM, SIGUSR1 or Ctrl-C has stopped every rank after one update and
    the checkpoint policy has saved `last.ckpt` (`training/run/stop.py`): 128 + the signal on global
    rank 0 (143, 138, 130), 0 on the others, since a launcher that sees a rank fail first
    (Lightning's, torchrun) kills the rest, rank 0 still closing its loggers. A signal that comes
    before training stops it after its first update.
    """
    with SIGNALS.recording(), ExitStack() as held:
        timeout = 60 * cfg.ddp_timeout_minutes
        rank_zero = is_global_rank_zero()
        parent: Parent | None = None

        def decide() -> RunPlan:
            nonlocal parent
            resumed = resume_point(cfg)
            # A resumed fine-tuning run takes its parent's record from its checkpoint's plan.
            record = resumed_parent(cfg, resumed[0])
            if record is None:
                # Fine-tuning's parent, read and checked once, refused before the run folder exists.
                parent = load_parent(cfg)
                record = parent.record if parent else None
            # Two runs writing one folder would overwrite each other's checkpoints: the second is
            # refused, as the plan is decided, so that every rank hears of it.
            held.enter_context(RunLock(cfg.paths.output_dir, enabled=rank_zero))
            return plan_run(cfg, record, resumed)

        # Decided once, on global rank 0, before anything is written; the other ranks take it.
        held.callback(withdraw_plan)
        plan = agreed_plan(decide, cfg.paths.output_dir, timeout)
        resume = ResumePoint(plan.resume_from)
        if plan.parent and parent is None:  # a resumed run, or a rank that took rank 0's plan
            parent = parent_from_plan(cfg, plan.parent, resume)
        log_slurm_job()
        warn_if_torchrun_cuts_the_stop()
        L.seed_everything(cfg.seed, workers=True)
        # What stops any rank here reaches the others, which would wait for it in fit.
        loggers: list[Logger] = []
        try:
            with start_handed_over(cfg.paths.output_dir, timeout):
                if rank_zero:
                    write_run_config(cfg)
                datamodule, module = build_data_and_module(cfg, plan, resume, parent)
                loggers = build_loggers(cfg, plan)
        except BaseException:
            # A W&B run begun here ends, failed, before this process trains again (a sweep).
            finish_wandb_runs(loggers, None, exit_code=1)
            raise
        return fit_and_report(cfg, datamodule, module, loggers, plan, resume, parent)


def fit_and_report(
    cfg: DictConfig,
    datamodule: TranslationDataModule,
    module: TranslationModule,
    loggers: list[Logger],
    plan: RunPlan,
    resume: ResumePoint,
    parent: Parent | None = None,
) -> dict[str, float]:
    """Build the trainer and fit; the logger runs end here, with the run's exit status."""
    trainer, exit_code = None, 1
    timeout = 60 * cfg.ddp_timeout_minutes

    def started() -> bool:
        return trainer is not None and trainer.global_step > resume.global_step

    try:
        # What stops any rank before its first step reaches the others, left in a collective.
        with refusals_handed_over(cfg.paths.output_dir, timeout, started):
            trainer = build_trainer(cfg, loggers, plan, parent)
            metrics = fit(trainer, module, datamodule, resume)
        exit_code = 0
        return metrics
    except Stopped as stopped:
        exit_code = stopped.code  # last.ckpt is saved and the stop logged: no traceback to add
        raise
    except BaseException as error:
        if SIGNALS.aborted():
            exit_code = exit_status(signal.SIGINT)
            log.warning("Ctrl-C twice: stopped at once; the checkpoints written before are kept")
            raise SystemExit(exit_code) from None
        log.error("Training failed: %r", error)  # into this run's log, also inside a sweep
        raise
    finally:
        checkpoint = trainer.checkpoint_callback if trainer else None
        finish_wandb_runs(loggers, checkpoint, exit_code=exit_code)
        # Only now: the requeue's SIGTERM ends W&B's service, losing the rows it has not written;
        # logger.wandb.finish_timeout bounds the wait within the time USR1 leaves (STOP_SECONDS).
        if exit_code == exit_status(REQUEUE_SIGNAL):
            requeue_this_job()


def build_data_and_module(
    cfg: DictConfig, plan: RunPlan, resume: ResumePoint, parent: Parent | None = None
) -> tuple[TranslationDataModule, TranslationModule]:
    """The DataModule batching as planned, and the LightningModule around a model sized by its
    tokenizer, or around the parent model a fine-tuning run starts from, in its vocabulary."""
    datamodule = instantiate(
        cfg.data,
        max_tokens=plan.max_tokens or "auto",
        tokens_per_update=plan.tokens_per_update,
        tokenizer=parent.tokenizer if parent else None,
    )
    tokenizer = datamodule.load_tokenizer()
    check_resume(resume, tokenizer)
    if parent:
        model = parent.model
    else:
        model = instantiate(cfg.model, vocab_size=tokenizer.vocab_size, pad_id=PAD_ID)
    log.info("Model: %s parameters", f"{sum(p.numel() for p in model.parameters()):,}")
    # Plain lists and dicts in hyperparameters keep checkpoints loadable with weights_only=True.
    module = instantiate(
        cfg.module,
        model=model,
        tokenizer=tokenizer,
        cooldown_steps=plan.cooldown_steps,
        _convert_="all",
        _partial_=True,
    )(languages=datamodule.languages)  # past Hydra, which would make a config of the dataclass
    return datamodule, module


def build_loggers(cfg: DictConfig, plan: RunPlan) -> list[Logger]:
    """The configured experiment loggers, W&B's on the run the plan chose, given the config once
    (`PlanRecord` adds the plan)."""
    loggers = [
        instantiate(c, group=wandb_group(cfg), run=plan.wandb_run)
        if name == "wandb"
        else instantiate(c)
        for name, c in (cfg.logger or {}).items()
    ]
    start_wandb_runs(loggers, OmegaConf.select(cfg, "callbacks.checkpoints.monitor"))
    config = cfg.copy()
    OmegaConf.set_struct(config, False)
    config.pop("hydra", None)  # tests compose with the Hydra node; a run's task config has none
    for logger in loggers:
        logger.log_hyperparams(OmegaConf.to_container(config, resolve=True))
    return loggers


def build_trainer(
    cfg: DictConfig, loggers: list[Logger], plan: RunPlan, parent: Parent | None = None
) -> L.Trainer:
    """The Trainer with its callbacks, ending, cooling down, keeping checkpoints, in the precision
    and accumulation the plan says; with the parent's optimizer and schedule state where
    `init.keep` names them."""
    callbacks = [instantiate(c, **planned(c, plan)) for c in (cfg.callbacks or {}).values()]
    callbacks += [PlanRecord(plan), AgreedStop(), EarlyStop(), RngStates()]
    if plan.max_time:  # in place of Lightning's Timer, whose end costs a sync a micro-batch
        callbacks.append(TimeBudget(plan.max_time))
    if parent and parent.kept:
        callbacks.append(KeepParentState(parent.kept))
    return instantiate(
        cfg.trainer,
        logger=loggers or False,
        callbacks=callbacks,
        precision=plan.precision,
        accumulate_grad_batches=plan.accumulate_grad_batches,
        max_steps=plan.max_steps,
        max_time=None,
        plugins=[*(instantiate(cfg.trainer.get("plugins")) or [])],
        strategy=ddp_strategy(cfg.trainer.strategy, cfg.ddp_timeout_minutes),
        # BPE-dropout segments the training pairs anew in each epoch's loader, and a multilingual
        # temperature other than 1 draws them anew (data/multilingual.py).
        reload_dataloaders_every_n_epochs=int(
            bool(cfg.data.get("bpe_dropout")) or cfg.data.get("temperature", 1) != 1
        ),
    )


def planned(callback: DictConfig, plan: RunPlan) -> dict[str, Any]:
    """The settings a configured callback takes from the plan, not from its config."""
    kind = get_class(callback._target_)
    if issubclass(kind, CheckpointPolicy):
        return {"keep_last": plan.keep_last}
    if issubclass(kind, TimedCooldown):
        return {"minutes": plan.cooldown_minutes}
    return {}


def fit(
    trainer: L.Trainer,
    module: TranslationModule,
    datamodule: TranslationDataModule,
    resume: ResumePoint,
) -> dict[str, float]:
    """Train (or resume), then return the final and best metrics; raise if the loss diverged,
    and `Stopped` if a signal stopped it."""
    trainer.fit(module, datamodule=datamodule, ckpt_path=resume.path, weights_only=True)
    raise_if_stopped(trainer)
    metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
    metrics.update(best_scores(trainer, resume))
    raise_if_diverged(metrics)
    return metrics
