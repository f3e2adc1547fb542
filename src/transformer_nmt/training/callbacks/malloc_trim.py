"""Give the heap's free pages back to the system after every validation: glibc's malloc_trim."""

import ctypes
import sys
from collections.abc import Callable

import lightning as L


def load_malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim(pad)`, or None where the C library has none (not Linux, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
    except OSError:
        return None
    return getattr(libc, "malloc_trim", None)


class MallocTrim(L.Callback):
    """Calls `malloc_trim(0)` at the end of every validation and training epoch.

    train.py keeps freed memory in the process (GLIBC_TUNABLES, experiments/allocator/), so that
    steps reuse it instead of mapping it again from the kernel; but then the resident size never
    shrinks, and every new batch shape can leave more of the heap resident and unused.
    malloc_trim releases the pages of free heap chunks (the heap itself stays mapped), so the
    resident size falls back to what is in use. Once a validation is rare enough that the steps
    keep their speed: the next ones fault back only the pages they need. A no-op off glibc.

    A trim walks the whole heap (tens of milliseconds), so none follows another with no batch
    between them, as an epoch's end does right after its validation.
    """

    def __init__(self) -> None:
        self._malloc_trim = load_malloc_trim()
        self._batches_since_trim = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._batches_since_trim = True

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ) -> None:
        self._batches_since_trim = True

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.trim()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.trim()

    def trim(self) -> None:
        if self._malloc_trim is not None and self._batches_since_trim:
            self._malloc_trim(0)  # 0: keep no free space at the heap's top either
            self._batches_since_trim = False
