"""The time budget that `trainer.max_time` sets, for callbacks that act within it."""

import lightning as L
from lightning.pytorch.callbacks import Timer


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
