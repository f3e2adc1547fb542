"""A model over a larger vocabulary, for fine-tuning with the parent's vocabulary extended."""

from dataclasses import replace

import torch

from transformer_nmt.model.families import FAMILIES
from transformer_nmt.model.interface import EncoderDecoder

# The weights with a row (or an entry) per token, in either family: the embeddings, and the
# output projection (tied to them or not) with its bias.
PER_TOKEN = ("src_embed.", "tgt_embed.", "generator.")


def with_vocab_size(model: EncoderDecoder, vocab_size: int) -> EncoderDecoder:
    """The model over `vocab_size` tokens, the first ones its own: their rows and every other
    weight copied exactly, the new tokens' rows as a new model of its family initialises them
    (drawn from the global RNG)."""
    if vocab_size < model.config.vocab_size:
        raise ValueError(f"vocab_size={vocab_size} would drop tokens of {model.config.vocab_size}")
    family = FAMILIES[model.config.family]
    grown = family.model.from_config(replace(model.config, vocab_size=vocab_size))
    old = model.state_dict()
    with torch.no_grad():
        # Tied weights appear under several names, one tensor: each copy writes the same rows.
        for name, weight in grown.state_dict().items():
            rows = len(old[name]) if name.startswith(PER_TOKEN) else None
            weight[:rows].copy_(old[name])
    return grown.to(next(model.parameters()).dtype)
