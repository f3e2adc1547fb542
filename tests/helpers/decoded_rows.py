"""The rows a model decodes at each call, as a search calls it."""

import contextlib
from collections.abc import Iterator

from torch import nn


@contextlib.contextmanager
def decoded_rows(model: nn.Module) -> Iterator[list[int]]:
    """Within the block, each `model.decode` call appends its row count to the list yielded."""
    decode, rows = model.decode, []

    def counted(tgt_in, *args, **kwargs):
        rows.append(tgt_in.size(0))
        return decode(tgt_in, *args, **kwargs)

    model.decode = counted
    try:
        yield rows
    finally:
        del model.decode  # the class's method again
