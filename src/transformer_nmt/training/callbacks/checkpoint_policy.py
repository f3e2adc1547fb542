"""The one checkpoint policy: when `last.ckpt`, the best and the periodic checkpoints are written
and which are kept."""

import errno
import logging
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig

from transformer_nmt.checkpoint import KIND_KEY, PERIODIC, best_name
from transformer_nmt.runtime.atomic import DiskFullError, is_disk_full
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.run.stop import Stopped
from transformer_nmt.training.step.val_metrics import mode as better_mode

log = logging.getLogger(__name__)

# What only resuming needs: a periodic checkpoint is kept for averaging, last.ckpt for resuming.
RESUME_ONLY_KEYS = ("optimizer_states", "lr_schedulers")
# Adam's two moments, each the size of the weights: a checkpoint to resume from is about 3 times
# one for averaging.
ADAM_SIZE_FACTOR = 3


class CheckpointPolicy(Checkpoint):
    """Writes and keeps every checkpoint of a run, through Lightning's public hooks only.

    - `last.ckpt`: everything a resumed run needs, refreshed at every validation and periodic
      save, and written when training ends (`max_steps`, `max_epochs`, `max_time`, or a stop
      that sets `trainer.should_stop`). The end records the loops' progress as it stood after
      the last update, as a periodic checkpoint at that step does: Lightning counts the last
      epoch as finished, and a run extended from it would otherwise skip the rest of a cut epoch,
      or the whole next one after a complete epoch.
    - every checkpoint holds the run at an update boundary: a validation inside a gradient
      accumulation writes `last.ckpt` once the update is done, and a file written inside one
      anyway (the best, or the end of training) records the loops' progress of the update's
      start, so that a resumed run trains its micro-batches again rather than skip them (their
      partial gradients are not saved); `RngStates` saves the random generators of that point.
    - the best by `monitor`: `step<N>-<metric><value>.ckpt` (`step900-ter41.20.ckpt`,
      `step900-bleu-de-fr30.10.ckpt`), one file, replaced when beaten.
    - periodic `step<N>.ckpt`, every `every_minutes` of training (or every `every_n_steps`), for
      averaging (`--average-last N` averages these only); the last `keep_last` kept, each new one
      whole before the oldest is deleted, without optimizer state unless `optimizer_state`. The
      clock is read every `check_every_n_steps` steps only: rank zero's reading is broadcast so
      the ranks agree, a collective best made on a step that waits for the device anyway.

    Every file goes through the trainer's `AtomicCheckpointIO`, is marked with its kind
    (`checkpoint.KIND_KEY`), and only global rank zero deletes. The best and the kept files are
    part of the callback's state, so a run resumed in its folder goes on replacing them.

    Args:
        dirpath: the folder of all of them.
        monitor, mode: the metric the best is chosen by (`module.monitor`'s, `val/bleu` by
            default) and whether higher (`max`) or lower (`min`) is better; None keeps no best.
            `mode=None`: the metric's own (`val_metrics.mode`: `min` for TER and the loss).
        every_minutes: minutes of training between periodic checkpoints; None: none by time.
        every_n_steps: optimizer steps between periodic checkpoints, instead of the clock.
        check_every_n_steps: optimizer steps between two looks at the clock.
        keep_last: periodic checkpoints kept, the newest; None keeps every one.
        optimizer_state: whether periodic files keep it too, so that a run can resume from any.
    """

    def __init__(
        self,
        dirpath: str,
        monitor: str | None = "val/bleu",
        mode: str | None = None,
        every_minutes: float | None = 10,
        every_n_steps: int | None = None,
        check_every_n_steps: int = 50,
        keep_last: int | None = None,
        optimizer_state: bool = False,
    ) -> None:
        if mode is None:
            mode = better_mode(monitor) if monitor else "max"
        if mode not in ("min", "max"):
            raise ValueError(
                f"callbacks.checkpoints.mode={mode!r} for monitor={monitor}: 'max' (higher is "
                "better) or 'min' (null takes the metric's own, known for val/<module.monitor>)"
            )
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"keep_last={keep_last}: keep at least 1 checkpoint, or None for all")
        self.dirpath = Path(dirpath)
        self.monitor, self.mode = monitor, mode
        self.every_minutes, self.every_n_steps = every_minutes, every_n_steps
        self.check_every_n_steps = check_every_n_steps
        self.keep_last, self.optimizer_state = keep_last, optimizer_state
        # Lightning's names, which W&B's checkpoint upload and `train`'s report read.
        self.best_model_path, self.best_model_score = "", None
        self.last_model_path = str(self.dirpath / "last.ckpt")
        self.current_score: torch.Tensor | None = None
        self.save_top_k = 1
        self.kept: list[str] = []  # periodic files on disk, oldest first
        self._saving: str | None = None  # the kind of the file being written
        self._step_seen = 0  # the optimizer step the last batch ended at
        self._inside_update = False  # whether the last batch was a micro-batch before the last
        self._last_due = False  # last.ckpt to write once the update under way is done
        self._periodic_since = 0.0  # time.monotonic() of the last periodic save, or the start
        self._after_last_update: dict | None = None  # the fit loop's state and epoch then

    @property
    def state_key(self) -> str:
        return self._generate_state_key(monitor=self.monitor)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._step_seen = trainer.global_step  # a resumed run does not save its first step again
        self._inside_update = False
        self._periodic_since = time.monotonic()
        self._log_disk(pl_module)

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        step = trainer.global_step
        self._inside_update = step == self._step_seen  # a micro-batch of an accumulated update
        if self._inside_update:
            return
        self._step_seen = step
        self._after_last_update = {
            "fit_loop": trainer.fit_loop.state_dict(),
            "epoch": trainer.current_epoch,
        }
        if self._periodic_due(trainer, step):
            self._save_periodic(trainer)
        elif self._last_due:
            self._save(trainer, self.last_model_path, "last")
        self._last_due = False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        score = trainer.callback_metrics.get(self.monitor) if self.monitor else None
        if score is not None:
            self.current_score = score.detach().clone()
            if self._improves(self.current_score):
                self._save_best(trainer, self.current_score)
        if self._inside_update:
            self._last_due = True  # its micro-batches' gradients would be lost
        else:
            self._save(trainer, self.last_model_path, "last")
        self._tell_loggers(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._save(trainer, self.last_model_path, "last")
        self._tell_loggers(trainer)

    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if self._saving is not None:
            checkpoint[KIND_KEY] = self._saving
        if self._saving == PERIODIC and not self.optimizer_state:
            for key in RESUME_ONLY_KEYS:
                checkpoint.pop(key, None)
        boundary = self._after_last_update
        if boundary is not None and (self._inside_update or _epoch_closed(trainer)):
            checkpoint["loops"]["fit_loop"] = boundary["fit_loop"]
            checkpoint["epoch"] = boundary["epoch"]

    def state_dict(self) -> dict[str, Any]:
        return {
            "dirpath": str(self.dirpath),
            "monitor": self.monitor,
            "best_model_score": self.best_model_score,
            "best_model_path": self.best_model_path,
            "kept": list(self.kept),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Another folder's files are not this run's to replace; `train` still reports its best.
        if state_dict.get("dirpath") == str(self.dirpath):
            self.best_model_score = state_dict.get("best_model_score")
            self.best_model_path = state_dict.get("best_model_path", "")
            self.kept = list(state_dict.get("kept", []))

    def _periodic_due(self, trainer: L.Trainer, step: int) -> bool:
        if self.every_n_steps is not None:
            return step % self.every_n_steps == 0
        if self.every_minutes is None or step % self.check_every_n_steps:
            return False
        due = time.monotonic() - self._periodic_since >= 60 * self.every_minutes
        return trainer.strategy.broadcast(due, src=0)

    def _save_periodic(self, trainer: L.Trainer) -> None:
        path = str(self.dirpath / f"step{trainer.global_step}.ckpt")
        self._save(trainer, path, PERIODIC)
        self._periodic_since = time.monotonic()
        if path not in self.kept:
            self.kept.append(path)
        while self.keep_last is not None and len(self.kept) > self.keep_last:
            trainer.strategy.remove_checkpoint(self.kept.pop(0))
        self._save(trainer, self.last_model_path, "last")  # a kill loses no more than this

    def _improves(self, score: torch.Tensor) -> bool:
        if not torch.isfinite(score):
            return False
        if self.best_model_score is None:
            return True
        best = torch.as_tensor(self.best_model_score, dtype=score.dtype, device=score.device)
        return bool(score > best if self.mode == "max" else score < best)

    def _save_best(self, trainer: L.Trainer, score: torch.Tensor) -> None:
        path = str(self.dirpath / best_name(self.monitor, trainer.global_step, float(score)))
        self._save(trainer, path, "best")
        previous, self.best_model_path, self.best_model_score = self.best_model_path, path, score
        if previous and previous != path:
            trainer.strategy.remove_checkpoint(previous)

    def _save(self, trainer: L.Trainer, path: str, kind: str) -> None:
        """Every rank takes part (the trainer's save ends in a barrier); rank zero writes.

        A full disk stops every rank here: rank zero raises `DiskFullError`, the others log it and
        exit 0 (`Stopped`), so that no launcher kills rank zero while it closes its loggers.
        Raised on rank zero alone, it would leave the others in the save's barrier, to fail with
        a lost connection (Gloo) or to wait `ddp_timeout_minutes` (NCCL).
        """
        self._saving = kind
        full = None
        try:
            trainer.save_checkpoint(path, weights_only=False)
        except OSError as error:
            if not is_disk_full(error):
                raise
            full = error.strerror if isinstance(error, DiskFullError) else str(error)
            trainer.strategy.barrier("Trainer.save_checkpoint")  # where the others wait
        finally:
            self._saving = None
        full = trainer.strategy.broadcast(full, src=0)
        if full is None:
            return
        if trainer.is_global_zero:
            raise DiskFullError(errno.ENOSPC, full)
        log.error("Global rank 0 could not save a checkpoint, so every rank stops: %s", full)
        raise Stopped(0)

    def _tell_loggers(self, trainer: L.Trainer) -> None:
        """W&B's `log_model` uploads the best (aliases best, latest) and last.ckpt (latest)."""
        for logger in trainer.loggers:
            logger.after_save_checkpoint(self)

    @rank_zero_only
    def _log_disk(self, pl_module: L.LightningModule) -> None:
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


def _epoch_closed(trainer: L.Trainer) -> bool:
    """Whether the fit loop has closed its last epoch, as it does when training ends."""
    epoch = trainer.fit_loop.epoch_progress.current
    return epoch.started > 0 and epoch.processed == epoch.started


def retention_problems(cfg: DictConfig) -> list[str]:
    """Periodic checkpoints kept fewer than the recipe averages: the average would be refused."""
    policy = (cfg.get("callbacks") or {}).get("checkpoints")
    keep, average = (policy or {}).get("keep_last"), cfg.get("average_last")
    if keep is None or average is None or keep >= average:
        return []
    return [
        f"callbacks.checkpoints.keep_last={keep} keeps fewer checkpoints than "
        f"average_last={average} averages (nmt-evaluate --average-last {average}): keep at "
        f"least {average}, or lower average_last"
    ]


def monitor_problems(cfg: DictConfig, resume: ResumePoint) -> list[str]:
    """A run resumed in its own folder that would keep its best by another metric than before:
    its best and periodic files would be left unreplaced and unpruned, and its best reported
    by the wrong metric."""
    policy = (cfg.get("callbacks") or {}).get("checkpoints")
    if not resume.resuming or resume.path_problem() or policy is None:
        return []
    for state in resume.checkpoint.get("callbacks", {}).values():
        saved = state.get("monitor")
        if "kept" not in state or state.get("dirpath") != str(Path(policy.dirpath)):
            continue  # not a checkpoint policy's, or another folder's: nothing to go on keeping
        if saved != policy.monitor:
            own = f"module.monitor={saved.removeprefix('val/')}" if saved else "monitor=null"
            return [
                f"ckpt_path={resume.path} kept its best by {saved}, this config by "
                f"{policy.monitor}: resume with the run's own {own}, or start a new run folder"
            ]
    return []
