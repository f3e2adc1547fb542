"""Label-smoothed cross-entropy (section 5.4 of the paper)."""

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll(logits: Tensor, target: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
    """Summed smoothed loss and summed NLL of real (non-pad) target positions.

    The smoothing is the one of `F.cross_entropy(label_smoothing=epsilon)`: epsilon of the mass
    spread uniformly over the vocabulary, computed as the mean log-probability instead of
    against a one-hot or smoothed target tensor. Returning the plain NLL as well costs nothing
    here and gives perplexity without a second log-softmax.

    Args:
        logits: (N, V) scores of the N real target positions, any float dtype; the log-softmax
            and the loss are computed in fp32.
        target: (N,) token ids.
    """
    lprobs = F.log_softmax(logits.float(), dim=-1)  # (N, V)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (N,)
    smooth = -lprobs.mean(dim=-1)  # (N,)
    loss = (1.0 - epsilon) * nll + epsilon * smooth
    return loss.sum(), nll.sum()


def perplexity(nll_sum: Tensor, num_tokens: Tensor | int) -> Tensor:
    return torch.exp(nll_sum / num_tokens)
