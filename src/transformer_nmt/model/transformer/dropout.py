"""Dropout (section 5.4) with a cheaper random mask on CPUs.

nn.Dropout on a CPU draws one Bernoulli sample per element from the serial Mersenne Twister, a
visible share of a training step (experiments/speed/README.md). Here one 64-bit draw
of the same generator serves four elements: each gets 16 of its bits, and is dropped when they
fall among the lowest round(p * 2^16) of their values. The drop rate is p to within 2^-17
(exactly the rounded rate), and the kept elements are scaled by the inverse of the exact keep
rate, so E[output] = input as with nn.Dropout. Seeding with torch.manual_seed makes the masks
reproducible, as before.
Elsewhere (CUDA, torch.compile's graphs, p of 0 or 1) this is F.dropout.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LANES = 2**16  # the values of a 16-bit lane of a 64-bit draw


class Dropout(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p  # settable during training: Transformer.dropout_rate

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """F.dropout(x, p, training), with the cheaper mask where it applies."""
    if not training or p == 0:
        return x
    threshold = round(p * LANES)  # the lowest this many of a lane's values drop
    if x.device.type != "cpu" or threshold == LANES or torch.compiler.is_compiling():
        return F.dropout(x, p, training)
    return x * keep_mask(x, threshold)


def keep_mask(x: Tensor, threshold: int) -> Tensor:
    """x's shape and dtype: 0 where dropped, 1 / (keep rate) where kept."""
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device)
    words.random_(-(2**63), None)  # all 64 bits: each int16 lane uniform in [-2^15, 2^15)
    lanes = words.view(torch.int16)[:n].view(x.shape)
    # The comparison writes x's dtype directly: a bool mask converted after it cost two more
    # passes over the elements (experiments/speed/).
    mask = torch.ge(lanes, threshold - LANES // 2, out=torch.empty_like(x))
    return mask.mul_(LANES / (LANES - threshold))
