"""Test-only: the auto budget's probe failing on global rank 1 alone, as a device fault would."""

import lightning as L

from transformer_nmt.training.callbacks.auto_max_tokens import AutoMaxTokens

PROBE_FAULT = "CUDA error: an illegal memory access was encountered (injected)"


class FailsOnRank1(AutoMaxTokens):
    """`AutoMaxTokens` whose measurement raises on global rank 1."""

    def measure(self, trainer: L.Trainer, pl_module: L.LightningModule, cap: int):
        if trainer.global_rank == 1:
            raise RuntimeError(PROBE_FAULT)
        return super().measure(trainer, pl_module, cap)
