"""The Transformer model: plain PyTorch, no Lightning or Hydra, read top to bottom like the paper.

config (its settings) -> masks -> attention -> feed_forward -> embeddings -> layers -> transformer
(the encoder-decoder and its cache) -> search (greedy and beam). `interface` writes down what
training and search need from any model family.
"""

from transformer_nmt.model.config import TransformerConfig
from transformer_nmt.model.interface import EncoderDecoder
from transformer_nmt.model.search import Hypothesis, beam_search, greedy_search, length_penalty
from transformer_nmt.model.transformer import Transformer, reorder_cache

__all__ = [
    "EncoderDecoder",
    "Hypothesis",
    "Transformer",
    "TransformerConfig",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "reorder_cache",
]
