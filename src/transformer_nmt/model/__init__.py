"""The Transformer model: plain PyTorch, no Lightning or Hydra."""

from transformer_nmt.model.search import greedy_search
from transformer_nmt.model.transformer import Transformer, reorder_cache

__all__ = ["Transformer", "greedy_search", "reorder_cache"]
