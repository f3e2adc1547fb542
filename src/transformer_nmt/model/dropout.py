"""Dropout (section 5.4) with a cheaper random mask on CPUs.

nn.Dropout on a CPU draws one Bernoulli sample per element from the serial Mersenne Twister:
about 8 ns an element, 7 % of a `small` training step (experiments/speed/). Here one 64-bit draw
of the same generator serves four elements: each gets 15 of its bits, and is dropped when they
fall below round(p * 2^15). The drop rate is p to within 2^-16 (exactly the rounded rate), and
the kept elements are scaled by the inverse of the exact keep rate, so E[output] = input as with
nn.Dropout. Seeding with torch.manual_seed makes the masks reproducible, as before.
Elsewhere (CUDA, torch.compile's graphs, p of 0 or 1) this is F.dropout.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LANE_BITS = 15  # of each 16-bit lane of a 64-bit draw: its top lane has a bit fewer (63 bits)
LANES = 2**LANE_BITS


class Dropout(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p
        self.threshold = round(p * LANES)  # lanes below it drop their element

    def forward(self, x: Tensor) -> Tensor:
        cheap = x.device.type == "cpu" and 0 < self.threshold < LANES
        if not self.training or not cheap or torch.compiler.is_compiling():
            return F.dropout(x, self.p, self.training)
        return x * keep_mask(x, self.threshold)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def keep_mask(x: Tensor, threshold: int) -> Tensor:
    """x's shape and dtype: 0 where dropped, 1 / (keep rate) where kept."""
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_()  # [0, 2^63)
    lanes = words.view(torch.int16)[:n] & (LANES - 1)  # 15 uniform bits an element
    scale = LANES / (LANES - threshold)
    return (lanes >= threshold).view(x.shape).to(x.dtype).mul_(scale)
