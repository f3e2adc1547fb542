"""The resume point: the checkpoint a run continues from, read once, and what it says."""

import functools
import os
from pathlib import Path
from typing import Any

from transformer_nmt.checkpoint import read_checkpoint


class ResumePoint:
    """The checkpoint `ckpt_path` names (None: a fresh run), asked by every step of `train`.

    Read on the first question, weights-only and with its tensors mapped rather than read:
    the config checks, the precision choice and the reported best scores all ask this one
    object, and only Lightning, restoring the training state, reads the file again.
    """

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = None if path is None else str(path)

    @property
    def resuming(self) -> bool:
        return self.path is not None

    def path_problem(self) -> str | None:
        """Why `ckpt_path` names no checkpoint file, or None if it does (or is not set)."""
        if self.path is None or Path(self.path).is_file():
            return None
        state = "is a folder" if Path(self.path).is_dir() else "does not exist"
        return (
            f"ckpt_path={self.path} {state}: give a checkpoint file such as "
            "<run dir>/checkpoints/last.ckpt, or drop ckpt_path to start afresh"
        )

    @functools.cached_property
    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint's entries (none for a fresh run); `CheckpointError` if it is unsafe
        or unreadable."""
        return {} if self.path is None else read_checkpoint(self.path, mmap=True)

    @property
    def global_step(self) -> int:
        """The optimizer steps taken before it was saved (0 for a fresh run)."""
        return self.checkpoint.get("global_step", 0)

    @property
    def model_config(self) -> dict[str, Any] | None:
        """The model settings it was trained with (`TranslationModule` saves them)."""
        return self.checkpoint.get("model_config")

    @property
    def tokenizer(self) -> str | None:
        """Its tokenizer, serialized (`BPETokenizer.to_str`)."""
        return self.checkpoint.get("tokenizer")

    @property
    def cpu_precision(self) -> str | None:
        """The precision it was trained in, if on a CPU (`TranslationModule` saves it)."""
        return self._precision_on("cpu")

    @property
    def gpu_precision(self) -> str | None:
        """The precision it was trained in, if on GPUs."""
        return self._precision_on("cuda")

    def _precision_on(self, device: str) -> str | None:
        saved = self.checkpoint.get("precision", {})
        return saved.get("precision") if saved.get("device") == device else None

    @property
    def averages_weights(self) -> bool:
        """Whether its weights are an average kept by a Lightning `WeightAveraging` callback,
        which alone puts back the trained weights it keeps beside them."""
        return "current_model_state" in self.checkpoint

    @property
    def best_scores(self) -> dict[str, float]:
        """The best score of each monitored metric saved in its checkpoint callbacks' states."""
        best = {}
        for state in self.checkpoint.get("callbacks", {}).values():
            monitor, score = state.get("monitor"), state.get("best_model_score")
            if monitor and score is not None:
                best[monitor] = float(score)
        return best
