"""Marian's SentencePiece tokenization (OPUS-MT models): its two models, its vocabulary, our ids.

An OPUS-MT folder holds `source.spm` and `target.spm` (SentencePiece models, one a language) and
`vocab.json`, the one vocabulary both sides share, in which `</s>` is 0, `<unk>` 1 and `<pad>` the
last id. Our ids keep `data/tokenizer.py`'s special tokens first (`<pad>`, `<s>`, `</s>`, `<unk>`)
and then Marian's other pieces in Marian's order, so that framing and search work unchanged;
`marian_ids` maps back. Marian has no `<s>`: its decoder starts from `<pad>`, whose row ours
copies into `<s>` on import (`export/hf_import.py`).

Encoding is `transformers.MarianTokenizer`'s: a leading language code such as `>>fra<<` is one
token, the rest the source (or target) model's pieces, a piece outside the vocabulary `<unk>`.
The SentencePiece library is imported on first use: only such checkpoints need it.
"""

import base64
import json
from typing import Any

from transformer_nmt.data.tokenizer import SPECIAL_TOKENS, UNK_ID, Pieces

KEY = "sentencepiece"  # the key of `to_str`'s JSON object, which tells the kinds apart
SIDES = ("source", "target")
# Marian's names for the special tokens ours has too; `<s>` it lacks.
MARIAN_SPECIALS = {"pad": "<pad>", "eos": "</s>", "unk": "<unk>"}


class SentencePieceTokenizer(Pieces):
    """Marian's SentencePiece models and vocabulary, with our special-token ids.

    Args:
        models: the serialized SentencePiece model of each side ("source", "target").
        marian_vocab: Marian's vocabulary, the piece of each Marian id in order; it holds
            `</s>`, `<unk>` and `<pad>` and no `<s>`.
    """

    def __init__(self, models: dict[str, bytes], marian_vocab: list[str]):
        import sentencepiece

        missing = [t for t in MARIAN_SPECIALS.values() if t not in marian_vocab]
        if missing or "<s>" in marian_vocab or len(set(marian_vocab)) != len(marian_vocab):
            raise ValueError(
                f"a Marian vocabulary holds {', '.join(MARIAN_SPECIALS.values())} once each and "
                f"no <s>; this one lacks {missing or 'none'}, has <s>: {'<s>' in marian_vocab}, "
                f"repeats pieces: {len(set(marian_vocab)) != len(marian_vocab)}"
            )
        self.models = {side: models[side] for side in SIDES}
        self.marian_vocab = list(marian_vocab)
        specials = set(MARIAN_SPECIALS.values())
        self.pieces = SPECIAL_TOKENS + [t for t in marian_vocab if t not in specials]
        self._ids = {piece: i for i, piece in enumerate(self.pieces)}
        self._processors = {
            side: sentencepiece.SentencePieceProcessor(model_proto=model)
            for side, model in self.models.items()
        }

    @property
    def vocab_size(self) -> int:
        """Number of token ids, special tokens included: Marian's and our `<s>`."""
        return len(self.pieces)

    def marian_ids(self) -> list[int]:
        """Our id of each Marian id in order; Marian's `<pad>`, its decoder start, is our `<s>`."""
        ours = dict(self._ids, **{"<pad>": SPECIAL_TOKENS.index("<s>")})
        return [ours[piece] for piece in self.marian_vocab]

    def marian_rows(self) -> list[int]:
        """The Marian id of each of our ids in order: `<s>` is Marian's decoder start, `<pad>`."""
        marian = {piece: i for i, piece in enumerate(self.marian_vocab)}
        marian["<s>"] = marian["<pad>"]
        return [marian[piece] for piece in self.pieces]

    def encode_batch(self, texts: list[str], side: str = "source") -> list[list[int]]:
        """Token ids of each text by `side`'s model, without special tokens."""
        processor = self._processors[side]
        out = []
        for text in texts:
            code = []
            if text.startswith(">>") and (end := text.find("<<")) != -1:
                code, text = [text[: end + 2]], text[end + 2 :]
            pieces = code + processor.encode(text, out_type=str)
            out.append([self._ids.get(piece, UNK_ID) for piece in pieces])
        return out

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        """Text of each target id sequence, special tokens skipped wherever they are."""
        processor = self._processors["target"]
        first = len(SPECIAL_TOKENS)
        return [
            processor.decode_pieces([self.pieces[i] for i in row if i >= first])
            .replace("▁", " ")
            .strip()
            for row in ids
        ]

    def to_str(self) -> str:
        """Serialize to a JSON string, e.g. to carry inside a checkpoint."""
        models = {side: base64.b64encode(model).decode() for side, model in self.models.items()}
        return json.dumps({KEY: {"models": models, "marian_vocab": self.marian_vocab}})

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "SentencePieceTokenizer":
        """Rebuild from `to_str`'s object (its KEY entry)."""
        models = {side: base64.b64decode(values["models"][side]) for side in SIDES}
        return cls(models, values["marian_vocab"])
