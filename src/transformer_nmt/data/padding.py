"""The padding rule: to which multiple batch lengths and projected rows round, by precision.

16-bit matmul kernels want few distinct shapes: tensor cores run multiples of 8 at full speed,
and oneDNN builds a bf16 CPU kernel for each new shape (experiments/speed/README.md). In fp32
the rounding only costs, so `pad_to_multiple_of="auto"` rounds in 16 bits only. The data
loader, the training loss and the config checks all ask this module, so they cannot disagree.
"""

from transformer_nmt.data.framing import ADDED_TOKENS, round_up

# The multiple "auto" pads lengths to under 16-bit precision.
HALF_PRECISION_PAD_MULTIPLE = 8
# The rounding may add this share of max_tokens to a side of a batch, no more.
ROUNDING_ALLOWANCE = 1 / 8
# The coarsest multiple the projected rows round to in 16 bits (`projected_rows`).
MAX_ROW_MULTIPLE = 128


def pad_multiple(setting: int | str, precision: str | None) -> int:
    """The multiple padded lengths round up to: `setting`, or for "auto" by `precision`."""
    if setting != "auto":
        return setting
    half = str(precision).startswith(("16", "bf16"))  # Lightning's 16-mixed, bf16-true...
    return HALF_PRECISION_PAD_MULTIPLE if half else 1


def rounding_budget(setting: int | str, max_tokens: int) -> int | None:
    """The budget `rounding_multiple` keeps the rounding near: "auto" rounds short batches more
    finely; a number given is kept as given (None)."""
    return max_tokens if setting == "auto" else None


def rounding_multiple(rows: int, longest: int, multiple: int, max_tokens: int | None) -> int:
    """The coarsest of `multiple`, its half, its quarter... that keeps a side within the budget.

    A batch of short pairs holds them by the hundred: rounding 9 tokens up to 16 would nearly
    double the positions it computes and holds. So the multiple halves until `rows` rows of
    `longest` rounded up fit in `max_tokens` plus `ROUNDING_ALLOWANCE` of it; None keeps
    `multiple` as it is.
    """
    if max_tokens is None:
        return multiple
    budget = max_tokens * (1 + ROUNDING_ALLOWANCE)
    while multiple > 1 and rows * round_up(longest, multiple) > budget:
        multiple //= 2
    return multiple


def longest_padded(max_len: int, setting: int | str) -> int:
    """The most positions a side of a batch can have: `max_len` tokens, framed, then rounded up
    as "auto" rounds at its coarsest (16 bits)."""
    return round_up(max_len + ADDED_TOKENS, pad_multiple(setting, "16-mixed"))


def projected_rows(n: int, precision: str | None) -> int:
    """How many rows the output projection computes for a batch's n real target positions.

    In fp32, n itself. In 16 bits, n rounded up to a multiple of 8 or of the largest power of
    two up to `MAX_ROW_MULTIPLE` that is at most n / 8, so the rounding adds under an eighth:
    n is new nearly every batch, and each new row count costs a new 16-bit kernel as each new
    length does, and the vocabulary-wide projection's kernels hold memory in oneDNN's cache
    (experiments/speed/README.md).
    """
    multiple = pad_multiple("auto", precision)
    if multiple == 1:
        return n
    while multiple < MAX_ROW_MULTIPLE and 2 * multiple <= n / 8:
        multiple *= 2
    return round_up(n, multiple)
