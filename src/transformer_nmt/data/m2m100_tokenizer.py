"""M2M-100's SentencePiece tokenization: its one model, its vocabulary, language tags, our ids.

An M2M-100 folder holds `sentencepiece.bpe.model` (one model for every language) and
`vocab.json`, in which `<s>` is 0, `<pad>` 1, `</s>` 2 and `<unk>` 3. The model's rows go on
past vocab.json: one language token a language (`__de__`, in the order of the tokenizer's
`language_codes` list), then filler rows (`madeupword0000`, ...) up to config.json's vocab_size.
Our ids keep `data/tokenizer.py`'s special tokens first and then the folder's other rows in its
order, its language tokens renamed to our tags (`<2de>`, `data/languages.py`); `folder_ids`
maps back. Encoding is `transformers.M2M100Tokenizer`'s: the model's pieces, a piece outside
vocab.json `<unk>`; decoding skips the special tokens and the language tags, as its
`skip_special_tokens=True`.
"""

import base64
import json
from collections.abc import Sequence
from typing import Any

from transformer_nmt.data.languages import language_tag
from transformer_nmt.data.tokenizer import SPECIAL_TOKENS, UNK_ID, Pieces, inverse, tagged_pieces

KEY = "m2m100"  # the key of `to_str`'s JSON object, which tells the kinds apart


def language_token(lang: str) -> str:
    """M2M-100's token for `lang`: `__de__`."""
    return f"__{lang}__"


class M2M100Tokenizer(Pieces):
    """M2M-100's SentencePiece model and vocabulary, with our special-token ids and tags.

    Args:
        model: the serialized SentencePiece model (`sentencepiece.bpe.model`).
        folder_vocab: the piece of each of the folder's ids in order: vocab.json's pieces, the
            language tokens, the filler rows; it holds `<s>`, `<pad>`, `</s>` and `<unk>`.
        languages: the language codes whose tokens it holds (`de`, ...), in its order.
        language_codes: the name of that list for `transformers.M2M100Tokenizer` ("m2m100").
    """

    def __init__(
        self,
        model: bytes,
        folder_vocab: Sequence[str],
        languages: Sequence[str],
        language_codes: str = "m2m100",
    ):
        import sentencepiece

        folder_vocab = list(folder_vocab)
        tags = {language_token(lang): language_tag(lang) for lang in languages}
        self.pieces = tagged_pieces(folder_vocab, tags, "M2M-100")
        self.model, self.folder_vocab = model, folder_vocab
        self.languages, self.language_codes = list(languages), language_codes
        self.tags = set(tags.values())
        ours = {piece: i for i, piece in enumerate(self.pieces)}
        # vocab.json's pieces: what encoding maps SentencePiece's pieces through.
        self._ids = {
            piece: ours[piece] for piece in folder_vocab[: self.vocab_json_size] if piece in ours
        }
        self._skipped = {ours[t] for t in self.tags} | set(range(len(SPECIAL_TOKENS)))
        self._processor = sentencepiece.SentencePieceProcessor(model_proto=model)

    @property
    def vocab_json_size(self) -> int:
        """The number of vocab.json's pieces: the folder's ids before its first language token."""
        first = language_token(self.languages[0]) if self.languages else None
        return self.folder_vocab.index(first) if first else len(self.folder_vocab)

    @property
    def vocab_size(self) -> int:
        """Number of token ids: the folder's rows."""
        return len(self.pieces)

    def folder_ids(self) -> list[int]:
        """Our id of each of the folder's ids in order."""
        tags = {language_token(lang): language_tag(lang) for lang in self.languages}
        ours = {piece: i for i, piece in enumerate(self.pieces)}
        return [ours[tags.get(piece, piece)] for piece in self.folder_vocab]

    def folder_rows(self) -> list[int]:
        """The folder's id of each of our ids in order."""
        return inverse(self.folder_ids())

    def encode_batch(self, texts: list[str], side: str = "source") -> list[list[int]]:
        """Token ids of each text, without special tokens; both sides share the one model."""
        return [
            [self._ids.get(piece, UNK_ID) for piece in self._processor.encode(text, out_type=str)]
            for text in texts
        ]

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        """Text of each id sequence, special tokens and language tags skipped wherever they are."""
        return [
            self._processor.decode_pieces(
                [self.pieces[i] for i in row if i not in self._skipped]
            ).strip()
            for row in ids
        ]

    def to_str(self) -> str:
        """Serialize to a JSON string, e.g. to carry inside a checkpoint."""
        return json.dumps(
            {
                KEY: {
                    "model": base64.b64encode(self.model).decode(),
                    "folder_vocab": self.folder_vocab,
                    "languages": self.languages,
                    "language_codes": self.language_codes,
                }
            }
        )

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "M2M100Tokenizer":
        """Rebuild from `to_str`'s object (its KEY entry)."""
        return cls(
            base64.b64decode(values["model"]),
            values["folder_vocab"],
            values["languages"],
            values["language_codes"],
        )
