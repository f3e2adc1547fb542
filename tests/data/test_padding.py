import pytest

from transformer_nmt.data.padding import (
    longest_padded,
    pad_multiple,
    projected_rows,
    rounding_multiple,
)


@pytest.mark.parametrize(
    ("setting", "precision", "expected"),
    [("auto", "bf16-mixed", 8), ("auto", "16-mixed", 8), ("auto", "32-true", 1),
     ("auto", None, 1), (4, "bf16-mixed", 4), (1, "16-mixed", 1)],
)  # fmt: skip
def test_auto_pads_to_multiples_of_8_in_16_bits_only(setting, precision, expected):
    assert pad_multiple(setting, precision) == expected


def test_short_pairs_round_more_finely_to_stay_near_the_budget():
    # 113 pairs of 9 tokens fill 1024; rounded to 16 they would take 1808 positions.
    assert rounding_multiple(113, 9, 8, max_tokens=1024) == 2  # 1130 <= 1024 * 9 / 8
    assert rounding_multiple(64, 9, 8, max_tokens=1024) == 8  # 1024: rounding to 8 fits
    assert rounding_multiple(113, 9, 8, max_tokens=None) == 8
    assert rounding_multiple(113, 9, 1, max_tokens=1024) == 1


def test_16_bit_rows_round_coarsely_but_add_under_an_eighth():
    assert projected_rows(1800, "32-true") == 1800
    assert projected_rows(17, "bf16-mixed") == 24
    assert projected_rows(900, "bf16-mixed") == 960  # a multiple of 64: 128 would pass 900 / 8
    assert projected_rows(1800, "bf16-mixed") == 1920  # of 128, the largest multiple
    for n in range(1, 5000):
        rows = projected_rows(n, "bf16-mixed")
        assert rows % 8 == 0 and n <= rows < n + max(8, n / 8)
    # An R-Drop batch of Multi30k projects 1,500 to 2,100 rows: 6 row counts, not 76.
    assert len({projected_rows(n, "bf16-mixed") for n in range(1500, 2100)}) == 6


def test_the_longest_batch_is_max_len_framed_and_rounded_as_16_bits_round():
    assert longest_padded(200, 8) == 208  # 201 rounded up
    assert longest_padded(200, "auto") == 208
    assert longest_padded(200, 1) == 201
