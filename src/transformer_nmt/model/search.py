"""Decoding a translation from a trained model."""

import torch
from torch import Tensor

from transformer_nmt.model.masks import padding_mask
from transformer_nmt.model.transformer import Transformer


@torch.no_grad()
def greedy_search(
    model: Transformer, src: Tensor, bos_id: int, eos_id: int, max_len_b: int = 50
) -> Tensor:
    """Pick the most likely token at each step, reusing the decoder's cached keys and values.

    The caller sets eval mode; this leaves the mode as it is.

    Args:
        model: the Transformer.
        src: (B, S) source ids, right-padded with model.config["pad_id"].
        bos_id, eos_id: begin- and end-of-sentence ids.
        max_len_b: a row stops at its source length (without padding) + max_len_b tokens,
            the paper's "input length + 50" (section 6.1), unless it emits EOS first.

    Returns:
        (B, T_out) ids without the leading BOS; each row ends with EOS (or is cut at its maximum
        length) and is then filled with pad_id. T_out is the longest row's length.
    """
    pad_id = model.config["pad_id"]
    src_mask = padding_mask(src, pad_id)  # (B, 1, 1, S)
    memory = model.encode(src)
    # Positions beyond the position table do not exist.
    max_lens = (src_mask.sum(dim=(1, 2, 3)) + max_len_b).clamp(
        max=model.config["max_positions"]
    )  # (B,)
    cache = model.new_cache()
    tokens = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    out = []
    for t in range(int(max_lens.max())):
        logits = model.decode(tokens, memory, src_mask, cache)  # (B, 1, V)
        tokens = logits[:, -1].argmax(dim=-1).masked_fill(finished, pad_id)[:, None]  # (B, 1)
        out.append(tokens)
        finished |= (tokens[:, 0] == eos_id) | (t + 1 >= max_lens)
        if finished.all():
            break
    return torch.cat(out, dim=1)
