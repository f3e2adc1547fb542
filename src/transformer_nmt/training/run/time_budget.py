"""The time budget that `trainer.max_time` sets, its end agreed by every rank, for callbacks
that act within it."""

import logging

import lightning as L
import torch
from lightning.pytorch.callbacks import Timer

log = logging.getLogger(__name__)


class TimeBudget(Timer):
    """Lightning's `Timer` for `trainer.max_time`, its end agreed on the step's all_reduce.

    Lightning's broadcasts global rank 0's verdict after every micro-batch, a host sync each.
    Here rank 0's clock votes in the step's sum instead (`stop.StopVotes`), and every rank reads
    the verdict at the update's optimizer step: all end after the same update, at no extra sync,
    and, as with Lightning's, validate the final weights.
    """

    def __init__(self, duration: str) -> None:
        super().__init__(duration=duration, interval="step")

    @property
    def state_key(self) -> str:
        return "Timer"  # Lightning's: a run resumed from a checkpoint it wrote keeps its clock

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        if trainer.is_global_zero:  # one clock decides, as the cool-downs' plans do
            pl_module.stop_votes.out_of_time = lambda: self.time_elapsed() >= self._duration

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_end(trainer, pl_module)
        pl_module.stop_votes.out_of_time = None

    def on_train_batch_end(self, trainer: L.Trainer, *args: object, **kwargs: object) -> None:
        pass  # no broadcast: the verdict is read at the optimizer step

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if trainer.should_stop or not pl_module.stop_votes.agreed_out_of_time():
            return
        trainer.should_stop = True
        if trainer.is_global_zero:
            log.info(
                "trainer.max_time reached after %.0f s: every rank stops after update %d",
                self.time_elapsed(),
                trainer.global_step + 1,
            )


def budget_timer(trainer: L.Trainer, setting: str, minutes: float, otherwise: str) -> Timer:
    """The `Timer` that `trainer.max_time` adds, once `setting`=`minutes` is found to lie inside
    its budget; `otherwise` names the setting that does without one."""
    timers = [c for c in trainer.callbacks if isinstance(c, Timer)]
    if not timers:
        raise ValueError(
            f"{setting}={minutes} needs a time budget: set trainer.max_time (e.g. 00:01:00:00), "
            f"or {otherwise}"
        )
    budget = (timers[0].time_remaining() + timers[0].time_elapsed()) / 60
    if not 0 < minutes < budget:
        raise ValueError(
            f"{setting}={minutes} must lie between 0 and the {budget:g} minutes of trainer.max_time"
        )
    return timers[0]
