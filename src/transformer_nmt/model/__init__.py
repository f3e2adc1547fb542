"""Two model families for translation, plain PyTorch with no Lightning or Hydra.

- `transformer/`: the Transformer of "Attention Is All You Need", read top to bottom like the
  paper (its `__init__` gives the order).
- `rnn/`: the RNN encoder-decoder with additive attention (Bahdanau et al., 2015) that the
  Transformer set out to replace.

What both share sits beside them: `interface` (what training and search need from any family),
`config` (the base of each family's settings), `families` (each family's name -> its classes, as
checkpoints store it), `embeddings` (scaled token embeddings), `masks`, `search` (greedy and
beam; `beam_trace` records its steps on request) and `quantization` (int8 decoding on a CPU).
"""

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
