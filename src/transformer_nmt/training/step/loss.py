"""Label-smoothed cross-entropy (section 5.4 of the paper)."""

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable


def label_smoothed_nll(logits: Tensor, target: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and summed NLL of real (non-pad) target positions.

    The smoothing is the one of `F.cross_entropy(label_smoothing=epsilon)`: epsilon of the mass
    spread uniformly over the vocabulary. Returning the plain NLL as well costs nothing here and
    gives perplexity without a second pass over the logits.

    Args:
        logits: (M, V) scores, M >= N: rows 0 to N - 1 score the N real target positions,
            and any rows after them are ignored (their gradient is 0). Any float dtype; the
            loss is computed in fp32. The backward pass overwrites them with their gradient,
            so they must not be read after backward.
        target: (N,) token ids.
    """
    return _LabelSmoothedNLL.apply(logits, target, epsilon)


# On CPUs each of the loss's walks over the (N, V) logits (max, exp, sums; the gradient's exp,
# scale, scatter) would stream them from memory: a block of rows at a time, about 1 MiB in fp32,
# keeps the walks in the core's cache. GPUs take the whole tensor at once.
CPU_BLOCK_ELEMENTS = 2**18


def row_blocks(logits: Tensor, n: int, share: int = 1) -> list[slice]:
    """Slices covering logits' first n rows; on CPUs a 1/share of the elements in each."""
    vocab = logits.size(-1)
    rows = (
        max(1, CPU_BLOCK_ELEMENTS // share // vocab) if logits.device.type == "cpu" else max(n, 1)
    )
    return [slice(start, min(start + rows, n)) for start in range(0, n, rows)]


class _LabelSmoothedNLL(torch.autograd.Function):
    """The loss and its gradient, softmax(z) - smoothed target, without (N, V) intermediates.

    With log p = z - logsumexp(z): nll = lse - z_target and the smoothing term
    -mean(log p) = lse - mean(z). Autograd through log_softmax would hold the log-probabilities,
    their gradient and the logits' gradient at once, three (N, V) tensors: 1.5 GB for 4096
    tokens and a 32k vocabulary. Here the backward pass turns the saved logits into their own
    gradient in place, a block of rows at a time (in fp32, then rounded back in 16 bits).
    """

    @staticmethod
    def forward(
        ctx: FunctionCtx, logits: Tensor, target: Tensor, epsilon: float
    ) -> tuple[Tensor, Tensor]:
        n = target.size(0)  # rows past n are ignored
        lse = logits.new_empty(n, dtype=torch.float32)  # (N,)
        nll, mean = torch.empty_like(lse), torch.empty_like(lse)
        for rows in row_blocks(logits, n):
            z = logits[rows].float()  # a view of fp32 logits, an fp32 copy of others
            lse[rows] = torch.logsumexp(z, dim=-1)
            nll[rows] = lse[rows] - z.gather(-1, target[rows].unsqueeze(-1)).squeeze(-1)
            mean[rows] = z.mean(dim=-1)
        ctx.save_for_backward(logits, target, lse)
        ctx.epsilon = epsilon
        loss = (1.0 - epsilon) * nll + epsilon * (lse - mean)
        return loss.sum(), nll.sum()

    @staticmethod
    @once_differentiable
    def backward(
        ctx: FunctionCtx, grad_loss: Tensor, grad_nll: Tensor
    ) -> tuple[Tensor, None, None]:
        logits, target, lse = ctx.saved_tensors
        eps, vocab = ctx.epsilon, logits.size(-1)
        # d loss / dz = p - (1 - eps) onehot - eps / V;  d nll / dz = p - onehot.
        scale, shift = grad_loss + grad_nll, grad_loss * eps / vocab
        hit = -(grad_loss * (1.0 - eps) + grad_nll)
        n, grad = target.size(0), logits  # the logits become their gradient
        grad[n:].zero_()  # the ignored rows
        for rows in row_blocks(logits, n):
            block = logits[rows].float()  # the rows themselves in fp32, a copy in 16 bits
            block.sub_(lse[rows].unsqueeze(-1)).exp_()  # softmax(z)
            block.mul_(scale).sub_(shift)
            block.scatter_add_(-1, target[rows].unsqueeze(-1), hit.expand(block.size(0), 1))
            if block.dtype != grad.dtype:
                grad[rows] = block  # rounded to the logits' dtype: fp16 overflow stays inf
        return grad, None, None


def perplexity(nll_sum: Tensor, num_tokens: Tensor | int) -> Tensor:
    return torch.exp(nll_sum / num_tokens)
