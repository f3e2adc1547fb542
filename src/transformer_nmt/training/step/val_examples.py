"""The fixed validation sentences that sample callbacks show at every validation."""

from typing import Any

import lightning as L
import numpy as np


def pick_val_examples(
    trainer: L.Trainer, count: int, indices: list[int] | None = None
) -> list[dict[str, Any]]:
    """Examples of the validation set: `indices` if given, else `count` spread evenly over it.

    Each is the dataset's dict: "src" (ids ending in EOS), "tgt" (ids), "src_text", "tgt_text".
    The same indices every validation, so a sentence's pictures can be compared across steps.
    """
    loader = trainer.val_dataloaders
    dataset = (loader[0] if isinstance(loader, list | tuple) else loader).dataset
    if indices is None:
        indices = np.linspace(0, len(dataset) - 1, min(count, len(dataset))).round().astype(int)
    return [dataset[int(i)] for i in indices]
