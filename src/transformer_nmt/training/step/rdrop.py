"""R-Drop (Liang et al., 2021): two dropout passes of each sentence, held to agree.

Every training sentence goes through the model twice in one batch. Dropout draws its masks per
element, so the two copies see different sub-networks; a symmetric KL divergence between their
output distributions, weighted by alpha, joins the two copies' label-smoothed losses. fairseq's
`label_smoothed_cross_entropy_with_rdrop` criterion is the same loss. An update then costs about
twice the same batch without it, the KL included (experiments/multi30k_sweep/README.md).
"""

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from transformer_nmt.training.step.loss import row_blocks


def doubled(batch: dict[str, Any]) -> dict[str, Any]:
    """The batch followed by a copy of itself: 2B sentences, the copy's target rows after the
    originals' (collate's "tgt_index" shifted past the first B rows)."""
    tgt_out = batch["tgt_out"]
    index = batch["tgt_index"]
    return {
        "src": batch["src"].repeat(2, 1),
        "tgt_in": batch["tgt_in"].repeat(2, 1),
        "tgt_out": tgt_out.repeat(2, 1),
        "tgt_index": torch.cat([index, index + tgt_out.numel()]),
    }


def symmetric_kl(logits: Tensor, n: int) -> Tensor:
    """Summed (KL(p||q) + KL(q||p)) / 2 over n token pairs, in fp32.

    Args:
        logits: (M, V), M >= 2n: rows 0 to n - 1 are one pass (p), rows n to 2n - 1 the other
            pass at the same positions (q); any rows after them are ignored (gradient 0).
    """
    return _SymmetricKL.apply(logits, n)


class _SymmetricKL(torch.autograd.Function):
    """The divergence and its gradient in one walk over the pairs' rows, a block at a time.

    Autograd through log-softmax and the products made a dozen passes over (n, V) tensors and
    held them for backward, costing twice the label-smoothed loss; this walk takes about a third
    of that (experiments/speed/README.md). The gradient is computed with the divergence, while
    the rows are in cache: backward cannot read the logits, which the label-smoothed loss's
    backward overwrites with its own gradient. With a = log p - log q,
    d/dz_p = (p (a - KL(p||q)) + p - q) / 2 and d/dz_q = (q (-a - KL(q||p)) + q - p) / 2.
    """

    @staticmethod
    def forward(ctx: FunctionCtx, logits: Tensor, n: int) -> Tensor:
        grad = torch.empty_like(logits) if logits.requires_grad else None
        total = logits.new_zeros((), dtype=torch.float32)
        for p_rows in row_blocks(logits, n, share=4):  # temporaries of four blocks each
            q_rows = slice(p_rows.start + n, p_rows.stop + n)
            log_p = F.log_softmax(logits[p_rows].float(), dim=-1)
            log_q = F.log_softmax(logits[q_rows].float(), dim=-1)
            p, q = log_p.exp(), log_q.exp()
            a = log_p.sub_(log_q)
            kl_pq = (p * a).sum(-1, keepdim=True)
            kl_qp = (q * a).sum(-1, keepdim=True).neg_()
            total += kl_pq.sum() + kl_qp.sum()
            if grad is not None:  # -2x: q - p (a - KL(p||q) + 1), p + q (a + KL(q||p) - 1)
                g_p, g_q = grad[p_rows], grad[q_rows]
                torch.addcmul(q, p, a - (kl_pq - 1), value=-1, out=g_p).mul_(-0.5)
                torch.addcmul(p, q, a.add_(kl_qp - 1), out=g_q).mul_(-0.5)
        if grad is not None:
            grad[2 * n :].zero_()
        ctx.save_for_backward(grad)
        return total * 0.5

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_total: Tensor) -> tuple[Tensor, None]:
        (grad,) = ctx.saved_tensors
        return grad.mul_(grad_total.to(grad.dtype)), None
