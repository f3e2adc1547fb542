"""Lightning's checkpoint writing (its CheckpointIO plugin) through `save_atomically`. Reading,
averaging and saving live in `transformer_nmt.checkpoint`, which inference uses without Lightning.
"""

import os
from typing import Any

from lightning.fabric.plugins import TorchCheckpointIO

from transformer_nmt.checkpoint import save_atomically


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writing through `save_atomically`: a kill mid-save keeps the old file.

    Lightning's own save stages the file in the system's temporary folder and moves it: when that
    folder is on another filesystem (usual on clusters) the move is a copy into the target, which a
    kill cuts short; and without fsync a crash of the machine can leave an empty file behind.
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None
    ) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        save_atomically(checkpoint, path)
