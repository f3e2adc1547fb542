"""How much of each training batch is padding: what length bucketing is meant to save."""

from typing import Any

import lightning as L
from torch import Tensor

from transformer_nmt.data.tokenizer import PAD_ID


class PaddingShare(L.Callback):
    """Logs `train/src_pad_share` and `train/tgt_pad_share`: pad positions / all positions.

    Computed on this rank's batch (rank zero's is the one logged): the cost of padding is paid
    per rank, step by step.
    """

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        pl_module.log("train/src_pad_share", pad_share(batch["src"]))
        pl_module.log("train/tgt_pad_share", pad_share(batch["tgt_out"]))


def pad_share(ids: Tensor) -> Tensor:
    """Share of a padded (B, L) id tensor that is padding, as a 0-d tensor.

    A tensor, not a float: `.item()` would wait for the device every step; `log` syncs only
    when it writes.
    """
    return (ids == PAD_ID).float().mean()
