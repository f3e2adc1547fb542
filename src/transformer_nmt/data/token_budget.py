"""`data.max_tokens=auto`: the largest token budget whose worst batch fits the device's memory.

The worst batch of a budget is that of the longest length bucket: `budget // longest` pairs,
both sides `longest` tokens long, every target position real, so the output projection makes
full-vocabulary logits for all of them. At a fixed budget a longer bucket holds fewer rows but
attends over longer rows, so it needs the most memory; the logits are the same in every bucket.
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


def worst_batch(rows: int, longest: int, vocab_size: int, pad_to_multiple_of: int = 1) -> dict:
    """A (rows, longest) batch of random ids, every position real, as `collate` pads it.

    Args:
        rows: pairs in the batch.
        longest: tokens a side as the model reads them (EOS, or BOS, included).
        vocab_size: ids are drawn from the non-special ones below it.
        pad_to_multiple_of: as training pads, so that the probe runs training's shapes.
    """
    rng = np.random.default_rng(0)
    ids = rng.integers(FIRST_ID, vocab_size, size=(rows, 2, longest - ADDED_TOKENS)).tolist()
    examples = [{"src": source_ids(src), "tgt": tgt} for src, tgt in ids]
    return collate(examples, PAD_ID, pad_to_multiple_of)


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
