"""A callback that holds a trial still until a test lets it go: a worker's trial that is known to
be running, or trials that can end only if they run at the same time."""

import os
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig

from helpers.sweep_runs import wait_for
from transformer_nmt.runtime.atomic import write_atomically


class HoldUntil(L.Callback):
    """As fit starts, writes `started` (this pid) into the run folder, then waits until `count`
    files match `pattern`."""

    def __init__(self, pattern: str, count: int = 1) -> None:
        self.pattern = pattern
        self.count = count

    def on_fit_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        started = Path(HydraConfig.get().runtime.output_dir) / "started"
        write_atomically(started, str(os.getpid()))
        wait_for(self.pattern, self.count)


def hold_until(pattern: str | Path, count: int = 1) -> list[str]:
    """Overrides that make every trial hold until `count` files match `pattern`."""
    return [
        "+callbacks.hold._target_=helpers.hold_until.HoldUntil",
        f"+callbacks.hold.pattern='{pattern}'",
        f"+callbacks.hold.count={count}",
    ]
