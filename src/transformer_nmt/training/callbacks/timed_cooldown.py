"""The clock of a cool-down over the last minutes of a time budget, whatever the machine's pace."""

import logging
from collections import deque
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Timer
from omegaconf import DictConfig

from transformer_nmt.training.callbacks import configured
from transformer_nmt.training.run.time_budget import budget_timer
from transformer_nmt.training.step.lr_schedule import cooldown_window, timed_cooldown_problems

log = logging.getLogger(__name__)

# The setting that turns it on, as errors name it.
SETTING = "callbacks.timed_cooldown.minutes"


class TimedCooldown(L.Callback):
    """Takes the learning rate linearly to zero over the last `minutes` of `trainer.max_time`.

    A step budget (`module.cooldown_steps`) fixes the cool-down's updates in advance, but how
    many updates an hour holds depends on the machine, and even on its load that day
    (experiments/multi30k_sweep/README.md): a cool-down planned for a fast hour never starts in
    a slow one. This one starts when `minutes` of the budget are left. From the pace of the
    `minutes` before (updates per second of training, validation included, as the budget counts
    it) it predicts the update at which the budget runs out; the rate reaches zero there, and
    training stops there, with a last validation as when the budget ends it. The recent pace,
    not the whole run's, because the pace changes: R-Drop switched on late
    (`callbacks.late_dropout`) more than halves it, and a whole-run pace would plan updates the
    budget cannot hold. If the pace slows after the start, `trainer.max_time` still ends the
    run. Beside a step budget (`trainer.max_steps`, `module.cooldown_steps`) it starts only
    where the time budget is predicted to end first: the run ends cooled down either way.

    Configured as `callbacks.timed_cooldown` (conf/callbacks/default.yaml); `minutes: 0`, the
    default, leaves it idle. The clock is read every `trainer.log_every_n_steps` updates, and
    rank zero's plan is broadcast so every rank cools down alike; the plan goes to the module's
    `schedule` (`lr_schedule.LearningRate`).
    """

    def __init__(self, minutes: float) -> None:
        self.minutes = minutes
        self.window: tuple[int, int] | None = None  # (last update, updates), once started
        self._timer: Timer | None = None
        self._last_checked = -1
        self._clock: deque[tuple[float, int]] = deque()  # (elapsed seconds, update) at checks

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.minutes:
            self._timer = budget_timer(trainer, SETTING, self.minutes, f"{SETTING}=0")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.minutes and self.window is not None:  # resumed inside the cool-down
            pl_module.schedule.cool_down(*self.window)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        if not self.minutes:
            return
        step = trainer.global_step
        if self.window is not None:
            # Stopping as the Timer does, not through max_steps, validates the final weights.
            trainer.should_stop = trainer.should_stop or step >= self.window[0]
            return
        if step % trainer.log_every_n_steps or step == self._last_checked:
            return
        self._last_checked = step
        left, elapsed = self._timer.time_remaining(), self._timer.time_elapsed()
        while self._clock and self._clock[0][0] < elapsed - self.minutes * 60:
            self._clock.popleft()
        plan = None
        if trainer.is_global_zero and step and left <= self.minutes * 60:
            plan = cooldown_window(step, left, self._pace(elapsed, step))
            if 0 < trainer.max_steps <= plan[0]:
                plan = None  # the step budget ends first, with its own cool-down
        self._clock.append((elapsed, step))
        self.window = trainer.strategy.broadcast(plan, src=0)
        if self.window is not None:
            pl_module.schedule.cool_down(*self.window)
            log.info(
                "%.3g minutes left at update %d: cooling down to zero at update %d",
                left / 60,
                step,
                self.window[0],
            )

    def _pace(self, elapsed: float, step: int) -> float:
        """Updates a second since the earliest check in the last `minutes`, or since the start
        of the budget if there is none (the first check, or the first after a resume)."""
        since, since_step = self._clock[0] if self._clock else (0.0, 0)
        return (step - since_step) / (elapsed - since)

    def state_dict(self) -> dict[str, Any]:
        return {"window": self.window}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.window = state_dict["window"]


def settings_problems(cfg: DictConfig) -> list[str]:
    """A timed cool-down (under whatever callback key) without a time budget to cool down in."""
    problems = []
    steps, max_time = cfg.module.get("cooldown_steps", 0), cfg.trainer.get("max_time")
    for key, callback in configured(cfg, TimedCooldown):
        minutes = callback.get("minutes", 0)
        problems += timed_cooldown_problems(f"callbacks.{key}.minutes", minutes, steps, max_time)
    return problems
