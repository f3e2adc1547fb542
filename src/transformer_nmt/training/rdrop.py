"""R-Drop (Liang et al., 2021): two dropout passes of each sentence, held to agree.

Every training sentence goes through the model twice in one batch. Dropout draws its masks per
element, so the two copies see different sub-networks; a symmetric KL divergence between their
output distributions, weighted by alpha, joins the two copies' label-smoothed losses. fairseq's
`label_smoothed_cross_entropy_with_rdrop` criterion is the same loss. An update then costs more
than twice the same batch without it: 2.3x in the Multi30k recipe, the KL over the vocabulary
included (experiments/multi30k_sweep/, session 32).
"""

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor


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
            pass at the same positions (q); any rows after them are ignored.
    """
    log_p = F.log_softmax(logits[:n].float(), dim=-1)
    log_q = F.log_softmax(logits[n : 2 * n].float(), dim=-1)
    # KL(p||q) + KL(q||p) = sum (p - q) (log p - log q)
    return 0.5 * ((log_p.exp() - log_q.exp()) * (log_p - log_q)).sum()
