"""Word alignments from encoder-decoder attention, in Pharaoh format ("0-0 1-2 ...").

Each target subword is aligned to the source subword it attends to most (source EOS and padding
left out), as it is predicted; subword pairs become pairs of whitespace-separated words.
"""

from dataclasses import dataclass

from torch import Tensor

# How a subword that starts a new word begins: byte-level BPE's space, SentencePiece's.
WORD_STARTS = ("Ġ", "▁")
# Byte-level BPE's space, line break and tab, SentencePiece's space: a subword of these alone
# (a run of spaces) is white space between words, as str.split() sees it, not a word.
WHITE_SPACE = "ĠĊĉ▁"

HEADS = ("mean", "best")


@dataclass(frozen=True)
class Alignment:
    """Which attention aligns.

    Args:
        layer: the decoder layer, 1-based; -1 the last (RNNsearch has one).
        heads: "mean" averages the layer's heads; "best" takes, per sentence, the head whose
            rows are most peaked (the highest mean of each target position's largest weight).
    """

    layer: int = -1
    heads: str = "mean"

    def __post_init__(self) -> None:
        if self.layer == 0 or self.layer < -1:
            raise ValueError(f"alignment layer must be >= 1 (or -1: the last), got {self.layer}")
        if self.heads not in HEADS:
            raise ValueError(f"alignment heads must be one of {HEADS}, got {self.heads!r}")

    @property
    def index(self) -> int:
        """The layer as a 0-based list index (-1: the last)."""
        return -1 if self.layer == -1 else self.layer - 1


def combine_heads(weights: Tensor, heads: str) -> Tensor:
    """(h, T, S) one sentence's attention, real rows and columns only -> (T, S)."""
    if heads == "mean":
        return weights.mean(dim=0)
    confidence = weights.amax(dim=-1).mean(dim=-1)  # (h,)
    return weights[int(confidence.argmax())]


def pharaoh(
    weights: Tensor, src_ids: list[int], tgt_ids: list[int], vocab: list[str], heads: str
) -> str:
    """Word pairs "i-j" (source word i, target word j), sorted, from one sentence's attention.

    Args:
        weights: (h, T, S) attention as the target is read after BOS: row t predicts tgt_ids[t]
            (the last row, predicting EOS, and any further ones are ignored); column s is
            src_ids[s] (EOS and padding after them ignored).
        vocab: the tokenizer's token of each id (`tokenizer.tokens()`).
    """
    if not src_ids or not tgt_ids:
        return ""
    real = combine_heads(weights[:, : len(tgt_ids), : len(src_ids)], heads)  # (T, S)
    src_words, tgt_words = word_indices(vocab, src_ids), word_indices(vocab, tgt_ids)
    pairs = {(src_words[s], tgt_words[t]) for t, s in enumerate(real.argmax(dim=-1).tolist())}
    return " ".join(f"{i}-{j}" for i, j in sorted(pairs))


def word_indices(vocab: list[str], ids: list[int]) -> list[int]:
    """The whitespace-separated word each subword id falls in, numbered as `text.split()` does.

    A new word begins at a word start or after white space; a subword of white space alone
    counts with the word before it (the first word, at the start of the text).
    """
    words, word, after_space = [], -1, False
    for i in ids:
        token = vocab[i]
        if not token.strip(WHITE_SPACE):
            after_space = True
        elif word < 0 or after_space or token.startswith(WORD_STARTS):
            word, after_space = word + 1, False
        words.append(word)
    return [max(w, 0) for w in words]
