"""Forced decoding: what a model thinks of given translations, and where it attends for them."""

import torch
from torch import Tensor

from transformer_nmt.model.interface import EncoderDecoder
from transformer_nmt.model.masks import padding_mask


@torch.no_grad()
def token_log_probs(model: EncoderDecoder, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
    """(B, T) log P(tgt_out[t] | src, tgt_in[:t + 1]) under the model, 0 at padding.

    The full softmax over the vocabulary, as training's loss reads it (its NLL without label
    smoothing is minus their sum). The caller sets eval mode.

    Args:
        src: (B, S) source ids; tgt_in: (B, T) BOS then the target; tgt_out: (B, T) the target
            then EOS; all right-padded with model.config.pad_id.
    """
    # Only the real positions are projected (as training projects them): padding costs nothing.
    real = (tgt_out != model.config.pad_id).flatten().nonzero()[:, 0]  # (N,)
    logits = model(src, tgt_in, real).float()  # (N, V)
    ids = tgt_out.flatten().index_select(0, real)
    picked = logits.gather(-1, ids[:, None])[:, 0] - logits.logsumexp(dim=-1)
    out = torch.zeros(tgt_out.numel(), dtype=picked.dtype, device=picked.device)
    return out.index_copy_(0, real, picked).view_as(tgt_out)


@torch.no_grad()
def cross_attention(model: EncoderDecoder, src: Tensor, tgt_in: Tensor, layer: int) -> Tensor:
    """(B, h, T, S) encoder-decoder attention weights of decoder layer `layer` (0-based; -1 the
    last) as each target position predicts the next id; a one-layer, one-head family gives h = 1.
    """
    weights = cross_layers(model, src, tgt_in)
    if not -len(weights) <= layer < len(weights):
        shown = layer + 1 if layer >= 0 else layer  # 1-based, as --align-layer counts
        raise ValueError(f"alignment layer {shown}: the decoder has {len(weights)} layers")
    return weights[layer].float()


@torch.no_grad()
def attention_layers(model: EncoderDecoder) -> int:
    """The decoder's layers with encoder-decoder attention, counted on a one-token pass."""
    device = next(model.parameters()).device
    token = torch.tensor([[1 if model.config.pad_id == 0 else 0]], device=device)  # not PAD
    return len(cross_layers(model, token, token))


def cross_layers(model: EncoderDecoder, src: Tensor, tgt_in: Tensor) -> list[Tensor]:
    """Each decoder layer's (B, h, T, S) encoder-decoder attention weights."""
    memory = model.encode(src)
    return model.decode(tgt_in, memory, padding_mask(src, model.config.pad_id), None, True)[2]
