"""The networks only, in plain PyTorch and read as the paper: what a model computes, not how it
is trained or searched."""

from transformer_nmt.model.families import FAMILIES, config_from_dict, model_from_config
from transformer_nmt.model.interface import EncoderDecoder, ModelConfig
from transformer_nmt.model.rnn import RNNAttention, RNNConfig
from transformer_nmt.model.transformer import Transformer, TransformerConfig, reorder_cache

__all__ = [
    "FAMILIES",
    "EncoderDecoder",
    "ModelConfig",
    "RNNAttention",
    "RNNConfig",
    "Transformer",
    "TransformerConfig",
    "config_from_dict",
    "model_from_config",
    "reorder_cache",
]
