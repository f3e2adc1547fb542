"""The Transformer model: plain PyTorch, no Lightning or Hydra."""

from transformer_nmt.model.search import Hypothesis, beam_search, greedy_search, length_penalty
from transformer_nmt.model.transformer import Transformer, reorder_cache

__all__ = [
    "Hypothesis",
    "Transformer",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "reorder_cache",
]
