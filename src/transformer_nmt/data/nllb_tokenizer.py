"""NLLB's tokenization: transformers' NllbTokenizer backend, its language codes, our ids.

An NLLB folder's ids are its `tokenizer.json`'s: `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, the
SentencePiece pieces (fairseq's offset of one), then added tokens, the language codes
(`deu_Latn`, ...) and `<mask>`, at the ids the file gives them. config.json's vocab_size may count
rows past the tokenizer's (NLLB-200: 256206 rows, 256204 tokens), which no text encodes to.
Our ids keep `data/tokenizer.py`'s special tokens first and then the folder's other rows in its
order, each language code renamed to our tag: a language's name here is NLLB's code, so
`deu_Latn` is `<2deu_Latn>` (`--tgt-lang deu_Latn`); `folder_ids` maps back. Encoding is the
backend's without special tokens (the caller frames the source, as `data/languages.py` says);
decoding skips the special tokens and the language tags, as `skip_special_tokens=True`.
"""

import json
from collections.abc import Sequence
from typing import Any

from tokenizers import Tokenizer

from transformer_nmt.data.languages import language_tag
from transformer_nmt.data.tokenizer import SPECIAL_TOKENS, Pieces, inverse, tagged_pieces

KEY = "nllb"  # the key of `to_str`'s JSON object, which tells the kinds apart


def filler(row: int) -> str:
    """Our piece for a model row past the tokenizer's ids; no piece holds a space."""
    return f"<no token {row}>"


class NllbTokenizer(Pieces):
    """NLLB's `tokenizers` backend (as transformers builds it), with our special-token ids and tags.

    Args:
        tokenizer_json: the backend as `tokenizers.Tokenizer.to_str` writes it.
        languages: the language codes among its added tokens (`deu_Latn`, ...), in its order.
        rows: the model's vocabulary rows (config.json's vocab_size), at least the tokenizer's ids.
    """

    def __init__(self, tokenizer_json: str, languages: Sequence[str], rows: int):
        backend = Tokenizer.from_str(tokenizer_json)
        size = backend.get_vocab_size(with_added_tokens=True)
        folder_vocab = [backend.id_to_token(i) for i in range(size)]
        if None in folder_vocab or rows < size:
            raise ValueError(
                f"an NLLB tokenizer numbers its {size} tokens 0..{size - 1} and the model has a "
                f"row for each; this one lacks ids or has {rows} rows"
            )
        folder_vocab += [filler(row) for row in range(size, rows)]
        tags = {lang: language_tag(lang) for lang in languages}
        self.pieces = tagged_pieces(folder_vocab, tags, "NLLB")
        self.tokenizer_json, self.folder_vocab = tokenizer_json, folder_vocab
        self.languages = list(languages)
        self._backend = backend
        ours = {piece: i for i, piece in enumerate(self.pieces)}
        self._ours = [ours[tags.get(piece, piece)] for piece in folder_vocab]
        self._folder = self.folder_rows()
        fillers = {self._ours[row] for row in range(size, rows)}
        tag_ids = {ours[tag] for tag in tags.values()}
        self._skipped = tag_ids | fillers | set(range(len(SPECIAL_TOKENS)))

    @property
    def vocab_size(self) -> int:
        """Number of token ids: the model's rows."""
        return len(self.pieces)

    def folder_ids(self) -> list[int]:
        """Our id of each of the folder's ids in order."""
        return list(self._ours)

    def folder_rows(self) -> list[int]:
        """The folder's id of each of our ids in order."""
        return inverse(self._ours)

    def encode_batch(self, texts: list[str], side: str = "source") -> list[list[int]]:
        """Token ids of each text, without special tokens; both sides share the one backend."""
        encodings = self._backend.encode_batch(texts, add_special_tokens=False)
        return [[self._ours[i] for i in encoding.ids] for encoding in encodings]

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        """Text of each id sequence, special tokens and language tags skipped wherever they are."""
        rows = [[self._folder[i] for i in row if i not in self._skipped] for row in ids]
        return self._backend.decode_batch(rows, skip_special_tokens=True)

    def to_str(self) -> str:
        """Serialize to a JSON string, e.g. to carry inside a checkpoint."""
        return json.dumps(
            {
                KEY: {
                    "tokenizer": self.tokenizer_json,
                    "languages": self.languages,
                    "rows": len(self.folder_vocab),
                }
            }
        )

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "NllbTokenizer":
        """Rebuild from `to_str`'s object (its KEY entry)."""
        return cls(values["tokenizer"], values["languages"], values["rows"])
