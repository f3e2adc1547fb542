"""Either kind of tokenizer rebuilt from the string it saves (`to_str`), as checkpoints and
exported folders keep it; beside both kinds, so that neither imports the other."""

import json

from transformer_nmt.data import sentencepiece_tokenizer as sp
from transformer_nmt.data.tokenizer import BPETokenizer, SubwordTokenizer


def tokenizer_from_str(s: str) -> SubwordTokenizer:
    """Rebuild either kind from its `to_str` string (a checkpoint's "tokenizer")."""
    if s.startswith(f'{{"{sp.KEY}":'):
        return sp.SentencePieceTokenizer.from_dict(json.loads(s)[sp.KEY])
    return BPETokenizer.from_str(s)
