"""Sequence framing, the one home of BOS, EOS and padding: what the model reads and predicts.

A source is its tokens then EOS. The decoder reads BOS then the target tokens and predicts the
target tokens then EOS, one position ahead. Training data, translation, the attention plots and
the callbacks all frame sequences here, so that training and inference cannot drift apart.

A multilingual model (`data/multilingual.py`) names the target language by a tag, a `Frame`:
in place of BOS by default (as fairseq's decoder language token; M2M-100 forces it as the
first generated token), so that the decoder starts with it and the loss is never charged for
predicting a token that translation forces; or before the source tokens (Johnson et al., 2017).
"""

from collections.abc import Sequence
from typing import NamedTuple

import torch

from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

# Special tokens framing adds to a side: EOS after a source; BOS before (or EOS after) a target.
ADDED_TOKENS = 1
# How search starts and ends a target: greedy_search(model, src, **TARGET_FRAME, ...).
TARGET_FRAME = {"bos_id": BOS_ID, "eos_id": EOS_ID}


class Frame(NamedTuple):
    """How one direction frames its pairs: a source prefix (a tag, or none) and the decoder's
    first token (BOS, or a tag in its place)."""

    source_prefix: tuple[int, ...] = ()
    bos_id: int = BOS_ID


PLAIN = Frame()  # one direction's framing: no tag


def first_token(example: dict) -> int:
    """The decoder's first token for a dataset example: its "bos_id" (a tag) where it has one."""
    return example.get("bos_id", PLAIN.bos_id)


def source_ids(
    tokens: Sequence[int], max_positions: int | None = None, prefix: Sequence[int] = ()
) -> list[int]:
    """A source as the encoder reads it: prefix, tokens then EOS, cut to fit max_positions."""
    if max_positions is not None:
        tokens = tokens[: max_positions - ADDED_TOKENS - len(prefix)]
    return [*prefix, *tokens, EOS_ID]


def decoder_input(tokens: Sequence[int], bos_id: int = BOS_ID) -> list[int]:
    """What the decoder reads: BOS (or the tag in its place) then the target tokens."""
    return [bos_id, *tokens]


def decoder_target(tokens: Sequence[int]) -> list[int]:
    """What the decoder predicts at each input position: the target tokens then EOS."""
    return [*tokens, EOS_ID]


def cut_at_eos(ids: Sequence[int]) -> list[int]:
    """A decoded id sequence up to (without) its first EOS."""
    ids = list(ids)
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids


def round_up(length: int, multiple: int) -> int:
    """The smallest multiple of `multiple` that is at least `length` (numpy arrays work too)."""
    return -(-length // multiple) * multiple


def pad_batch(
    sequences: Sequence[Sequence[int]], pad_to_multiple_of: int = 1, pad_id: int = PAD_ID
) -> torch.Tensor:
    """Right-pad id sequences into a (B, L) LongTensor on the host, L the longest length rounded up.

    Host-side by design: batches are built in DataLoader workers and moved to the device after.
    """
    width = round_up(max(map(len, sequences)), pad_to_multiple_of)
    out = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    for row, seq in enumerate(sequences):
        out[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def source_batch(
    tokens: Sequence[Sequence[int]], max_positions: int, prefix: Sequence[int] = ()
) -> torch.Tensor:
    """(B, S) padded sources from token ids: each cut to the position table, EOS appended."""
    return pad_batch([source_ids(row, max_positions, prefix) for row in tokens])
