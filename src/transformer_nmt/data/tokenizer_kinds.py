"""Each kind of tokenizer rebuilt from the string it saves (`to_str`), as checkpoints and
exported folders keep it; beside the kinds, so that none imports another."""

import json

from transformer_nmt.data import m2m100_tokenizer as m2m
from transformer_nmt.data import nllb_tokenizer as nllb
from transformer_nmt.data import sentencepiece_tokenizer as sp
from transformer_nmt.data.tokenizer import BPETokenizer, SubwordTokenizer

# The kinds an M2M-100 network carries: M2M-100's own tokenizer and NLLB's.
M2M100_KINDS = (m2m.M2M100Tokenizer, nllb.NllbTokenizer)


def tokenizer_from_str(s: str) -> SubwordTokenizer:
    """Rebuild any kind from its `to_str` string (a checkpoint's "tokenizer")."""
    if s.startswith(f'{{"{sp.KEY}":'):
        return sp.SentencePieceTokenizer.from_dict(json.loads(s)[sp.KEY])
    if s.startswith(f'{{"{m2m.KEY}":'):
        return m2m.M2M100Tokenizer.from_dict(json.loads(s)[m2m.KEY])
    if s.startswith(f'{{"{nllb.KEY}":'):
        return nllb.NllbTokenizer.from_dict(json.loads(s)[nllb.KEY])
    return BPETokenizer.from_str(s)
