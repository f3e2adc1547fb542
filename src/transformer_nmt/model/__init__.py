"""The Transformer model: plain PyTorch, no Lightning or Hydra, read top to bottom like the paper.

config (its settings) -> masks -> attention -> feed_forward -> embeddings -> dropout -> layers ->
transformer (the encoder-decoder and its cache) -> search (greedy and beam). `interface` writes
down what training and search need from any model family; `rnn` (with `rnn_config`) is the other
family, the RNN encoder-decoder with additive attention; `families` maps each family's name to
its classes.
"""

from transformer_nmt.model.config import TransformerConfig
from transformer_nmt.model.families import FAMILIES, config_from_dict, model_from_config
from transformer_nmt.model.interface import EncoderDecoder, ModelConfig
from transformer_nmt.model.rnn import RNNAttention
from transformer_nmt.model.rnn_config import RNNConfig
from transformer_nmt.model.search import Hypothesis, beam_search, greedy_search, length_penalty
from transformer_nmt.model.transformer import Transformer, reorder_cache

__all__ = [
    "FAMILIES",
    "EncoderDecoder",
    "Hypothesis",
    "ModelConfig",
    "RNNAttention",
    "RNNConfig",
    "Transformer",
    "TransformerConfig",
    "beam_search",
    "config_from_dict",
    "greedy_search",
    "length_penalty",
    "model_from_config",
    "reorder_cache",
]
