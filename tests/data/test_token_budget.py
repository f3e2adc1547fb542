"""`largest_budget`: the largest multiple of the longest pair that fits, and its worst batch."""

import pytest

from transformer_nmt.data.token_budget import BudgetError, largest_budget, worst_batch


@pytest.mark.parametrize("fitting_rows", [1, 2, 3, 7, 8, 13, 40])
def test_the_largest_fitting_multiple_of_the_longest_pair_is_found(fitting_rows):
    asked = []

    def fits(budget: int) -> bool:
        asked.append(budget)
        return budget <= fitting_rows * 50

    assert largest_budget(fits, longest=50, cap=10_000) == fitting_rows * 50
    assert len(asked) <= 2 * 8  # doubling then bisecting: logarithmic in the rows


def test_the_cap_bounds_the_budget_even_where_more_would_fit():
    # 420's worst batch is 400's (8 pairs of 50): the cap itself is the budget.
    assert largest_budget(lambda budget: True, longest=50, cap=420) == 420
    assert largest_budget(lambda budget: True, longest=50, cap=30) == 50  # one pair at least


def test_a_longest_pair_that_fits_nowhere_is_named():
    with pytest.raises(BudgetError, match="the longest training pair, 257 tokens a side"):
        largest_budget(lambda budget: False, longest=257, cap=25_000)


def test_the_worst_batch_is_full_on_both_sides_and_padded_as_training_pads():
    batch = worst_batch(rows=3, length=13, vocab_size=100, pad_to_multiple_of=8)
    assert batch["src"].shape == (3, 16) and batch["tgt_in"].shape == (3, 16)
    assert batch["tgt_index"].numel() == 3 * 13  # every target position real: full logits
    assert int(batch["src"].max()) < 100
