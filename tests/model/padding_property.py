"""A property every model family must hold, checked by each family's tests."""

import torch
from torch import nn


def assert_padding_changes_nothing(model: nn.Module, src, tgt, pad: int, tolerance: float) -> None:
    """Padding the source or the target changes no real token's encoding or logits.

    src and tgt: batches of 2 sentences, of 7 and 5 source and 6 and 4 target tokens.
    """
    padded_src = nn.functional.pad(src, (0, 3), value=pad)
    padded_tgt = nn.functional.pad(tgt, (0, 2), value=pad)
    close = {"atol": tolerance, "rtol": tolerance}
    real = src != pad
    encoded = model.encode(src)[real]
    torch.testing.assert_close(model.encode(padded_src)[:, :7][real], encoded, **close)
    real = tgt != pad
    logits = model(src, tgt)[real]
    torch.testing.assert_close(model(padded_src, tgt)[real], logits, **close)
    torch.testing.assert_close(model(src, padded_tgt)[:, :6][real], logits, **close)
