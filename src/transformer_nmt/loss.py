"""Label-smoothed cross-entropy (section 5.4 of the paper)."""

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll(
    logits: Tensor, target: Tensor, epsilon: float, pad_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Summed smoothed loss and summed NLL over non-pad targets, and the token count.

    The smoothing is the one of `F.cross_entropy(label_smoothing=epsilon)`: epsilon of the mass
    spread uniformly over the vocabulary. Returning the plain NLL as well costs nothing here
    and gives perplexity without a second log-softmax.

    Args:
        logits: (B, T, V) scores, any float dtype; the loss is computed in fp32.
        target: (B, T) token ids, pad_id where there is no target.
    """
    keep = target != pad_id  # (B, T)
    lprobs = F.log_softmax(logits[keep].float(), dim=-1)  # (N, V), only real positions
    nll = -lprobs.gather(-1, target[keep].unsqueeze(-1)).squeeze(-1)  # (N,)
    smooth = -lprobs.mean(dim=-1)  # (N,)
    loss = (1.0 - epsilon) * nll + epsilon * smooth
    return loss.sum(), nll.sum(), keep.sum()


def perplexity(nll_sum: Tensor, num_tokens: Tensor) -> Tensor:
    return torch.exp(nll_sum / num_tokens.clamp(min=1))
