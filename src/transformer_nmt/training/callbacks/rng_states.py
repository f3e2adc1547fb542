"""Every rank's random generators in the checkpoint, so that a resumed run draws what the
uninterrupted one would have: dropout masks, and whatever else draws from the global generators."""

import logging
import random
from typing import Any

import lightning as L
import numpy as np
import torch

log = logging.getLogger(__name__)


def rng_states() -> dict[str, Any]:
    """This process's torch (CPU), CUDA (its current device), NumPy and Python generator states,
    as tensors, tuples and numbers: a checkpoint holding them loads with `weights_only=True`."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    states = {
        "torch": torch.get_rng_state(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    """Puts back what `rng_states` took."""
    torch.set_rng_state(states["torch"])
    kind, keys, position, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():  # not when a GPU run resumes on a CPU
        torch.cuda.set_rng_state(states["cuda"])


class RngStates(L.Callback):
    """Saves the random generators of every rank with each checkpoint and puts them back on resume.

    A rank's generators drift apart from the others' (each draws dropout masks for its own
    batches), and Lightning writes the checkpoint from global rank 0 only, so every rank's states
    are gathered (one `all_gather_object`, as every rank takes part in a save) and each resumed
    rank takes its own, by global rank (the plan refuses a resume on another world size).

    The states saved are those of the moment, which the uninterrupted run goes on from, except
    inside a gradient accumulation: there every checkpoint holds the run as of the update's start
    (`CheckpointPolicy`), and so do the states, taken as each update ends, so that the resumed run
    draws its micro-batches' masks again. They come back as training starts, after everything a
    resumed run does first (setup, the sanity check, the budget probe); the loaders draw their
    workers' seeds from their own generator, so that the global ones serve training steps only.
    """

    def __init__(self) -> None:
        self._restored: list[dict[str, Any]] | None = None
        self._step_seen = 0
        self._inside_update = False  # whether the last batch was a micro-batch before the last
        self._at_update_start: dict[str, Any] | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._restored is not None:
            set_rng_states(self._restored[trainer.global_rank])
            self._restored = None
        elif trainer.ckpt_path is not None and trainer.is_global_zero:
            log.warning(
                "%s holds no random generator states (written by an older version): the run "
                "goes on from the seed's, so its dropout masks differ from the interrupted run's",
                trainer.ckpt_path,
            )
        self._step_seen, self._inside_update = trainer.global_step, False
        self._at_update_start = rng_states() if trainer.accumulate_grad_batches > 1 else None

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        self._inside_update = trainer.global_step == self._step_seen
        if not self._inside_update:
            self._step_seen = trainer.global_step
            if trainer.accumulate_grad_batches > 1:
                self._at_update_start = rng_states()

    def state_dict(self) -> dict[str, Any]:
        states = self._at_update_start if self._inside_update else rng_states()
        if not torch.distributed.is_available() or not torch.distributed.is_initialized():
            return {"ranks": [states]}
        gathered: list[dict[str, Any] | None] = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(gathered, states)
        return {"ranks": gathered}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._restored = state_dict["ranks"]
