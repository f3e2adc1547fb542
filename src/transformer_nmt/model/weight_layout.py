"""Where linear layers' weights lie in memory, for decoding on a CPU."""

import torch
from torch import nn


def transpose_linear_weights(model: nn.Module) -> nn.Module:
    """Lay each `nn.Linear` weight (out, in) out as the transpose of a contiguous (in, out) one.

    `F.linear` multiplies by W^T; with W^T contiguous, the CPU's GEMM runs the few rows of a
    decoder step 1.2-2x faster and a greedy translation ~1.1x (experiments/frontier/README.md),
    and a thousand rows (the encoder) as fast as before. Values, shapes and parameters stay: each
    parameter gets the new storage in place, so tied weights (the output projection and the
    target embedding) stay one tensor and an optimizer holding them still holds them.
    """
    with torch.no_grad():
        for module in model.modules():
            # A weight seen twice (tied between two layers) is transposed once.
            if isinstance(module, nn.Linear) and module.weight.is_contiguous():
                module.weight.set_(module.weight.t().contiguous().t())
    return model
