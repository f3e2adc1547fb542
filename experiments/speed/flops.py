"""The work of a training step in FLOPs, and the matmul peak to set it against."""

import math
import time

import torch
from torch import Tensor

from experiments.common.batches import real_lengths
from experiments.common.peers import Size


def training_flops(size: Size, src: Tensor, tgt_in: Tensor) -> float:
    """FLOPs of one training step over the real (non-pad) tokens: 3x the forward's matmuls.

    Forward, 2 FLOPs per multiply-add: every projection weight once per token it applies to
    (encoder: Q, K, V, O and the FFN on source tokens; decoder: self-attention Q, K, V, O,
    cross-attention Q and O and the FFN on target tokens, cross-attention K and V on source
    tokens; the output projection on target tokens), plus attention's Q K^T and weights x V,
    2 S_q S_k d_model each per layer and sentence, counted in full (not halved for the causal
    mask). Backward is twice the forward. Embedding lookups, softmax and norms are not counted.
    """
    d, d_ff, N, V = size.d_model, size.d_ff, size.N, size.vocab
    S, T = real_lengths(src).double(), real_lengths(tgt_in).double()
    encoder = N * (S.sum() * 2 * (4 * d * d + 2 * d * d_ff) + (S * S).sum() * 4 * d)
    decoder = N * (
        T.sum() * 2 * (6 * d * d + 2 * d * d_ff)
        + S.sum() * 2 * (2 * d * d)
        + (T * T).sum() * 4 * d
        + (S * T).sum() * 4 * d
    )
    output = T.sum() * 2 * d * V
    return 3 * float(encoder + decoder + output)


def matmul_peak(dtype: torch.dtype, n: int, repeats: int) -> dict[str, float]:
    """FLOP/s of an (n, n) x (n, n) product per operand layout, fastest of `repeats` runs.

    The layouts differ a lot where bf16 is emulated: a linear layer's forward multiplies by a
    transposed weight ("a @ b.T"), its backward also runs the other two.
    """
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    products = {"a @ b": lambda: a @ b, "a @ b.T": lambda: a @ b.T, "a.T @ b": lambda: a.T @ b}
    flops = {}
    for layout, product in products.items():
        product()  # warm-up
        best = math.inf
        for _ in range(repeats):
            start = time.perf_counter()
            product()
            best = min(best, time.perf_counter() - start)
        flops[layout] = 2 * n**3 / best
    return flops
