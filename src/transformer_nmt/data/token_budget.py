"""`data.max_tokens=auto`: the largest token budget whose worst batches fit the device's memory.

A budget has a worst batch at each end of the length buckets, both sides full and every target
position real, so that the output projection makes full-vocabulary logits for all of them. The
longest bucket's `budget // longest` pairs attend over the longest rows; the shortest bucket's
`budget // shortest` pairs carry the most padding, as lengths round up to `pad_to_multiple_of`
(pairs of 2 tokens padded to 8 hold 4x the budget's positions). Which of the two needs more
memory depends on the model and the padding, so the probe runs both; the logits are the same.
"""

from collections.abc import Callable

import numpy as np

from transformer_nmt.data.batching import collate
from transformer_nmt.data.framing import ADDED_TOKENS, source_ids
from transformer_nmt.data.tokenizer import PAD_ID

# Of the free memory measured before the search, the share left unused: the allocator's
# fragmentation over many shapes, validation's search and what other processes allocate later.
MEMORY_MARGIN = 0.1
# Without data.tokens_per_update the budget stops here: a larger batch changes the training.
MAX_AUTO_TOKENS = 65536
# The budget on CPUs, whose batches are not sized to a device's memory: base.yaml's default.
CPU_MAX_TOKENS = 4096
FIRST_ID = 4  # random ids start after PAD, BOS, EOS and UNK


class BudgetError(ValueError):
    """Not even one pair of the longest length fits in the device's memory."""


def worst_batch(
    rows: int,
    length: int,
    vocab_size: int,
    pad_to_multiple_of: int = 1,
    max_tokens: int | None = None,
) -> dict:
    """A (rows, length) batch of random ids, every position real, as `collate` pads it.

    Args:
        rows: pairs in the batch.
        length: tokens a side as the model reads them (EOS, or BOS, included).
        vocab_size: ids are drawn from the non-special ones below it.
        pad_to_multiple_of: as training pads, so that the probe runs training's shapes.
        max_tokens: the rounding budget `collate` keeps `pad_to_multiple_of="auto"` within
            (`padding.rounding_budget`); None rounds to `pad_to_multiple_of` as it is.
    """
    rng = np.random.default_rng(0)
    ids = rng.integers(FIRST_ID, vocab_size, size=(rows, 2, length - ADDED_TOKENS)).tolist()
    examples = [{"src": source_ids(src), "tgt": tgt} for src, tgt in ids]
    return collate(examples, PAD_ID, pad_to_multiple_of, max_tokens)


def largest_budget(fits: Callable[[int], bool], longest: int, cap: int) -> int:
    """The largest budget up to `cap` whose worst batches fit: `cap` itself if they fit, else a
    multiple of `longest`.

    Tries the cap first (on enough ranks it binds, and one probe settles it), then doubles the
    rows of the longest pairs until they no longer fit, then bisects; `fits` must grow no
    likelier with a larger budget, as memory does.

    Args:
        fits: whether a training step on the worst batches of this budget fits in memory.
        longest: tokens a side of the longest pair, EOS included.
        cap: the largest budget wanted.

    Raises:
        BudgetError: one pair of the longest length does not fit.
    """
    if not fits(longest):
        raise BudgetError(
            f"the longest training pair, {longest} tokens a side with EOS, does not fit in the "
            "device's free memory even alone: lower data.max_len, free the device, or train a "
            "smaller model"
        )
    if cap <= longest:
        return longest
    if fits(cap):
        return cap
    most = (cap - 1) // longest  # the most rows of longest pairs below the cap
    good, bad = 1, None
    while bad is None and good < most:
        rows = min(2 * good, most)
        if fits(rows * longest):
            good = rows
        else:
            bad = rows
    while bad is not None and bad - good > 1:
        rows = (good + bad) // 2
        good, bad = (rows, bad) if fits(rows * longest) else (good, rows)
    return good * longest
