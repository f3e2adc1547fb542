"""Checkpoints every so many minutes of training, the last K kept, with the clock read every N
steps only."""

import logging
from datetime import timedelta
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_only

log = logging.getLogger(__name__)

# What only resuming needs: a periodic checkpoint is kept for averaging, last.ckpt for resuming.
RESUME_ONLY_KEYS = ("optimizer_states", "lr_schedulers")
# Adam's two moments, each the size of the weights: a checkpoint to resume from is about 3 times
# one for averaging.
ADAM_SIZE_FACTOR = 3


class PeriodicCheckpoint(ModelCheckpoint):
    """A `ModelCheckpoint` for averaging: the last `keep_last` only, without optimizer state.

    Lightning 2.6's ModelCheckpoint reads the clock after every training batch and, so that the
    ranks agree, broadcasts rank zero's decision with `broadcast_object_list`: a pickle through a
    device tensor, one collective and host-device copies every batch. Checking every N steps
    saves a checkpoint up to N steps late and costs the broadcast once per N steps; with N equal
    to `trainer.log_every_n_steps` it falls on a step that waits for the device anyway. Other
    triggers (`every_n_train_steps`, `every_n_epochs`) work as in ModelCheckpoint.

    A day writes 144 periodic checkpoints at the 10-minute interval: only the last `keep_last`
    are kept (the paper averages 5 or 20), each written whole before the oldest is deleted, so
    K whole files are always on disk. They hold the weights, EMA and the loops' state but, unless
    `optimizer_state`, no optimizer state (a third of the size); `last.ckpt` (`save_last`) keeps
    everything a resumed run needs. The kept files are part of the callback's state, so a resumed
    run goes on deleting the files of its first part.

    Args:
        check_every_n_steps: optimizer steps between two looks at the clock.
        keep_last: periodic checkpoints kept, the newest; None keeps every one.
        optimizer_state: whether periodic files keep it too, so that a run can resume from any.
        train_time_interval, **kwargs: as ModelCheckpoint's.
    """

    def __init__(
        self,
        check_every_n_steps: int = 50,
        keep_last: int | None = None,
        optimizer_state: bool = False,
        train_time_interval: timedelta | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(train_time_interval=train_time_interval, **kwargs)
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"keep_last={keep_last}: keep at least 1 checkpoint, or None for all")
        self.check_every_n_steps = check_every_n_steps
        self.keep_last = keep_last
        self.optimizer_state = optimizer_state
        self.kept: list[str] = []  # periodic files on disk, oldest first
        self._timed = train_time_interval is not None
        self._for_averaging = False  # while a periodic (not last) file is being written

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self._timed and trainer.global_step % self.check_every_n_steps:
            return
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    @rank_zero_only
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        weights = sum(p.numel() * p.element_size() for p in pl_module.parameters())
        full = ADAM_SIZE_FACTOR * weights
        periodic = full if self.optimizer_state else weights
        if self.keep_last is None:
            log.warning(
                "Periodic checkpoints in %s: every one kept, %.2f GB each (keep_last=null)",
                self.dirpath,
                periodic / 1e9,
            )
            return
        log.info(
            "Checkpoints in %s: the last %d periodic ones of ~%.2f GB, last.ckpt and the best "
            "of ~%.2f GB each: ~%.2f GB at most",
            self.dirpath,
            self.keep_last,
            periodic / 1e9,
            full / 1e9,
            (self.keep_last * periodic + 2 * full) / 1e9,
        )

    def _save_none_monitor_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict) -> None:
        filepath = self._get_metric_interpolated_filepath_name(monitor_candidates, trainer)
        self.best_model_path = filepath  # Lightning's name for the latest, without a monitor
        self._for_averaging = not self.optimizer_state
        try:
            self._save_checkpoint(trainer, filepath)
        finally:
            self._for_averaging = False
        if filepath not in self.kept:
            self.kept.append(filepath)
        while self.keep_last is not None and len(self.kept) > self.keep_last:
            self._remove_checkpoint(trainer, self.kept.pop(0))  # rank zero deletes

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if self._for_averaging:
            for key in RESUME_ONLY_KEYS:
                checkpoint.pop(key, None)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "kept": list(self.kept)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        if state_dict.get("dirpath", self.dirpath) == self.dirpath:
            self.kept = list(state_dict.get("kept", []))
