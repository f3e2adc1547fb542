"""The Transformer (Vaswani et al., 2017), read top to bottom like the paper's section 3.

config (its settings, Table 3) -> dropout (section 5.4) -> attention (3.2) -> feed_forward (3.3)
-> positions (3.5; the token embeddings of 3.4 are `model.embeddings`, shared with the RNN) ->
layers (3.1: the residual sublayer connection, encoder and decoder layers) -> model (the stacks,
the encoder-decoder and its incremental decoding cache).
"""

from transformer_nmt.model.transformer.config import TransformerConfig
from transformer_nmt.model.transformer.model import Transformer, reorder_cache

__all__ = ["Transformer", "TransformerConfig", "reorder_cache"]
