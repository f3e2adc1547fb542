"""The run plan through fit: completed by the measured auto budget, logged once, checkpointed."""

import logging
from typing import Any

import lightning as L

from transformer_nmt.training.run_plan import CHECKPOINT_KEY, RunPlan

log = logging.getLogger(__name__)


class PlanRecord(L.Callback):
    """Holds the run's `RunPlan`: logs it once as fit starts and writes it into every checkpoint.

    As fit starts, the plan is final: a `data.max_tokens=auto` budget left to the device has been
    measured as fit set up (`AutoMaxTokens`), and the plan takes it, once. The log line and the
    loggers' `run_plan` hyperparameters then say what training uses; every checkpoint holds it as
    `checkpoint["run_plan"]`, plain types, which a resumed run reuses (`run_plan.plan_run`).
    """

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.plan.max_tokens is None:
            max_tokens = trainer.datamodule.max_tokens
            self.plan = self.plan.measured(max_tokens, trainer.accumulate_grad_batches)
        if trainer.is_global_zero:
            log.info("%s", self.plan.describe())
        for logger in trainer.loggers:
            logger.log_hyperparams({CHECKPOINT_KEY: self.plan.to_dict()})

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint[CHECKPOINT_KEY] = self.plan.to_dict()


def fit_plan(trainer: L.Trainer) -> RunPlan | None:
    """The plan of the fit `trainer` runs; None for a Trainer built without one."""
    return next((c.plan for c in trainer.callbacks if isinstance(c, PlanRecord)), None)
