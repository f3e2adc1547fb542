"""The run plan through fit: completed by the measured auto budget, logged once, checkpointed,
and the validation interval counted in its updates."""

import logging
from typing import Any

import lightning as L

from transformer_nmt.training.plan.run_plan import CHECKPOINT_KEY, RunPlan
from transformer_nmt.training.plan.trainer_settings import val_check_batches

log = logging.getLogger(__name__)


class PlanRecord(L.Callback):
    """Holds the run's `RunPlan`: logs it once as fit starts and writes it into every checkpoint.

    As fit starts, the plan is final: a `data.max_tokens=auto` budget left to the device has been
    measured as fit set up, and `AutoMaxTokens` handed it to `take_measured`, which completes the
    plan and batches the datamodule and the trainer by it. The log line and the loggers'
    `run_plan` hyperparameters then say what training uses; every checkpoint holds it as
    `checkpoint["run_plan"]`, plain types, which a resumed run reuses (`run_plan.plan_run`).

    An integer `trainer.val_check_interval` counts updates; Lightning, which counts batches, is
    given it in the plan's accumulation (`trainer_settings.val_check_batches`) as fit starts,
    once that is final.
    """

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan
        self.val_check_interval: int | float | str | None = None  # as configured, in updates

    def take_measured(self, trainer: L.Trainer, max_tokens: int, accumulate: int) -> None:
        """Completes the plan with the measured auto budget, and batches by it."""
        self.plan = self.plan.measured(max_tokens, accumulate)
        trainer.datamodule.max_tokens = self.plan.max_tokens
        trainer.accumulate_grad_batches = self.plan.accumulate_grad_batches

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.plan.max_tokens is None:
            raise RuntimeError(
                "data.max_tokens=auto was not measured as fit set up: keep "
                "callbacks.auto_max_tokens (training/callbacks/auto_max_tokens.py) configured"
            )
        if self.val_check_interval is None:
            self.val_check_interval = trainer.val_check_interval
        trainer.val_check_interval = val_check_batches(
            self.val_check_interval,
            self.plan.accumulate_grad_batches,
            trainer.check_val_every_n_epoch,
        )
        if trainer.is_global_zero:
            log.info("%s", self.plan.describe())
        for logger in trainer.loggers:
            logger.log_hyperparams({CHECKPOINT_KEY: self.plan.to_dict()})

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint[CHECKPOINT_KEY] = self.plan.to_dict()


def plan_record(trainer: L.Trainer) -> PlanRecord | None:
    """The holder of the plan of the fit `trainer` runs; None for a Trainer built without one."""
    return next((c for c in trainer.callbacks if isinstance(c, PlanRecord)), None)


def fit_plan(trainer: L.Trainer) -> RunPlan | None:
    """The plan of the fit `trainer` runs; None for a Trainer built without one."""
    record = plan_record(trainer)
    return None if record is None else record.plan
