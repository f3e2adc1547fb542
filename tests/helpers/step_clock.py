"""A clock that moves with training batches: time budgets tested without timing races."""

import lightning as L
import lightning.pytorch.callbacks.timer


class StepClock:
    """Stands in for the `time` module of Lightning's `Timer`: `monotonic()` reads `now`."""

    now = 0.0

    @classmethod
    def monotonic(cls) -> float:
        return cls.now


class Tick(L.Callback):
    """Puts `StepClock` in the place of the `Timer`'s clock for the run, and moves it on by
    `seconds` as every training batch starts, by `first_extra` more before the first (a slow
    start, as data loading or warming caches give), and by `later_seconds` instead from update
    `later_from` + 1 on (a pace that changes, as R-Drop switched on late gives). Rank r's clock
    runs (1 + r * skew) times as fast, so that ranks see different times, as on a cluster."""

    def __init__(
        self,
        seconds: float,
        first_extra: float = 0.0,
        skew: float = 0.0,
        later_from: int = 0,
        later_seconds: float | None = None,
    ) -> None:
        self.seconds = seconds
        self.first_extra = first_extra
        self.skew = skew
        self.later_from = later_from
        self.later_seconds = later_seconds
        self._time = lightning.pytorch.callbacks.timer.time

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        StepClock.now = 0.0
        lightning.pytorch.callbacks.timer.time = StepClock

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        lightning.pytorch.callbacks.timer.time = self._time

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        step = trainer.global_step
        seconds = self.seconds
        if self.later_seconds is not None and step >= self.later_from:
            seconds = self.later_seconds
        first = self.first_extra if step == 0 else 0.0
        StepClock.now += (seconds + first) * (1 + trainer.global_rank * self.skew)


def tick(
    seconds: float,
    first_extra: float = 0.0,
    skew: float = 0.0,
    later_from: int = 0,
    later_seconds: float | None = None,
) -> list[str]:
    """Overrides that move the run's clock `seconds` a batch (tests/ must be on the path)."""
    return [
        "+callbacks.tick._target_=helpers.step_clock.Tick",
        f"+callbacks.tick.seconds={seconds}",
        f"+callbacks.tick.first_extra={first_extra}",
        f"+callbacks.tick.skew={skew}",
        f"+callbacks.tick.later_from={later_from}",
        f"+callbacks.tick.later_seconds={'null' if later_seconds is None else later_seconds}",
    ]
