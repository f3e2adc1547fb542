"""Each private Lightning attribute `training/lightning_internals.py` touches, named against the
installed Lightning: an upgrade that renames or stops reading one fails here, by name, rather
than silently turning a switch off. And no other module touches one."""

import inspect
import re
from pathlib import Path

import lightning as L
import pytest
from lightning.pytorch.loops.training_epoch_loop import _TrainingEpochLoop
from lightning.pytorch.trainer.connectors.logger_connector.logger_connector import (
    _LoggerConnector,
)

from transformer_nmt.training import lightning_internals
from transformer_nmt.training.lightning_internals import (
    SignalConnector,
    is_logging_batch,
    replace_signal_connector,
    set_global_step,
    skip_next_validation,
    stop_sigterm_broadcast,
)

SRC = Path(__file__).parents[2] / "src" / "transformer_nmt"
# A private attribute of a Lightning object, or a private name imported from Lightning.
PRIVATE = re.compile(
    r"(trainer|loop|connector|strategy)\._[a-z]\w*|from lightning[\w.]* import .*\b_[A-Za-z]"
)


@pytest.fixture
def trainer(tmp_path):
    return L.Trainer(
        accelerator="cpu", logger=False, enable_checkpointing=False, default_root_dir=tmp_path
    )


def reads(cls: type, method: str, name: str) -> bool:
    """Whether Lightning's `cls.method` still reads `self.<name>`."""
    return f"self.{name}" in inspect.getsource(getattr(cls, method))


def test_the_trainer_registers_and_removes_handlers_through_its_signal_connector(trainer):
    assert isinstance(trainer._signal_connector, SignalConnector)
    assert reads(L.Trainer, "_run", "_signal_connector.register_signal_handlers()")
    assert reads(L.Trainer, "_teardown", "_signal_connector.teardown()")

    class Quiet(SignalConnector):
        def register_signal_handlers(self) -> None: ...

    replace_signal_connector(trainer, Quiet)
    first = trainer._signal_connector
    replace_signal_connector(trainer, Quiet)
    assert isinstance(first, Quiet) and trainer._signal_connector is first


def test_the_epoch_loop_broadcasts_sigterm_and_skips_validation_by_these_names(trainer):
    assert reads(_TrainingEpochLoop, "advance", "_broadcast_sigterm_tensor()")
    assert reads(_TrainingEpochLoop, "on_advance_end", "_skip_next_val")
    stop_sigterm_broadcast(trainer)
    assert trainer.fit_loop.epoch_loop._broadcast_sigterm_tensor() is None
    assert trainer.fit_loop.epoch_loop._skip_next_val is False
    skip_next_validation(trainer)
    assert trainer.fit_loop.epoch_loop._skip_next_val is True


def test_the_logger_connector_says_whether_a_batch_is_logged(trainer):
    assert isinstance(inspect.getattr_static(_LoggerConnector, "should_update_logs"), property)
    assert is_logging_batch(trainer) in (True, False)


def test_the_global_step_is_the_optimizer_progress_and_the_loggers_step(trainer):
    assert reads(_TrainingEpochLoop, "on_advance_end", "_batches_that_stepped")
    set_global_step(trainer, 7)
    assert trainer.global_step == 7
    assert trainer.fit_loop.epoch_loop._batches_that_stepped == 7


def test_no_module_but_lightning_internals_touches_a_private_lightning_attribute():
    touching = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in SRC.rglob("*.py")
        if path.name != Path(lightning_internals.__file__).name
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not touching, "move these into training/lightning_internals.py:\n" + "\n".join(touching)
