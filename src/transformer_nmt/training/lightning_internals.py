"""Every private Lightning attribute the project touches, each behind one named function.

Lightning offers no public switch for these (as of 2.6): turning off its SIGTERM handling and
its per-batch broadcast, skipping the validation it runs before a stop, asking whether this batch
is logged, and setting the step count a fine-tuned run starts from. They live here alone so that
an upgrade that renames one fails in one place, and `tests/training/test_lightning_internals.py`
names each of them against the installed Lightning.
"""

import lightning as L
from lightning.pytorch.trainer.connectors.signal_connector import _SignalConnector

# Lightning's signal connector: registers its handlers as fit starts, removes them as it ends.
SignalConnector = _SignalConnector


def is_logging_batch(trainer: L.Trainer) -> bool:
    """Whether the loggers write this training batch's metrics (every `log_every_n_steps`).

    Lightning's own LearningRateMonitor and ThroughputMonitor ask the same private property.
    """
    return trainer._logger_connector.should_update_logs


def skip_next_validation(trainer: L.Trainer) -> None:
    """Skips the validation Lightning runs at the end of the batch that set `should_stop`."""
    trainer.fit_loop.epoch_loop._skip_next_val = True


def replace_signal_connector(trainer: L.Trainer, kind: type[_SignalConnector]) -> None:
    """Puts a `kind(trainer)` in place of the trainer's signal connector, unless it is one."""
    if not isinstance(trainer._signal_connector, kind):
        trainer._signal_connector = kind(trainer)


def stop_sigterm_broadcast(trainer: L.Trainer) -> None:
    """Turns off the epoch loop's broadcast of the SIGTERM flag before every micro-batch."""
    trainer.fit_loop.epoch_loop._broadcast_sigterm_tensor = lambda: None


def set_global_step(trainer: L.Trainer, step: int) -> None:
    """Makes `trainer.global_step` (optimizer steps completed) `step` before the first batch;
    `trainer.max_steps` counts on from it, and the loggers' step with it."""
    loop = trainer.fit_loop.epoch_loop
    progress = loop.automatic_optimization.optim_progress.optimizer.step.total
    progress.ready = progress.completed = step
    loop._batches_that_stepped = step
