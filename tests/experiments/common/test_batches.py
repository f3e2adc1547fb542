"""experiments/common/batches.py: the training sampler's batches, cut and padded as training's."""

import numpy as np
import pytest

from experiments.common import batches
from transformer_nmt.data.padding import ROUNDING_ALLOWANCE
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID

VOCAB = 100


@pytest.fixture(scope="module")
def lengths() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.integers(4, 40, size=3000), rng.integers(4, 40, size=3000)


def test_bf16_batches_round_as_the_data_module_does():
    # Short pairs, many to a batch: rounding each side up to 8 would pass the budget's eighth.
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(4, 17, size=3000), rng.integers(4, 17, size=3000)
    first = batches.training_batches(src, tgt, vocab=VOCAB, count=20, precision="bf16")
    budget = batches.DATA.max_tokens * (1 + ROUNDING_ALLOWANCE)
    sides = [b[side].numel() for b in first for side in ("src", "tgt_in")]
    assert batches.DATA.max_tokens < max(sides) <= budget


def test_an_epoch_holds_every_pair_once_at_its_length_within_the_token_budget(lengths):
    src, tgt = lengths
    epoch = batches.training_batches(src, tgt, vocab=VOCAB)
    assert all(
        b[side].numel() <= batches.DATA.max_tokens for b in epoch for side in ("src", "tgt_in")
    )
    real_src = np.concatenate([batches.real_lengths(b["src"]).numpy() for b in epoch])
    assert sorted(real_src) == sorted(src)
    assert batches.target_tokens(epoch) == tgt.sum()  # EOS ends each target
    ids = np.concatenate([b["src"][b["src"] != PAD_ID].numpy() for b in epoch])
    words = ids[ids != EOS_ID]
    assert words.min() >= batches.FIRST_ID and words.max() < VOCAB  # no special ids among words


def test_the_largest_batches_are_those_with_the_most_padded_positions(lengths):
    epoch = batches.training_batches(*lengths, vocab=VOCAB)
    largest = batches.largest_batches(epoch, 3)
    size = lambda b: b["src"].numel() + b["tgt_in"].numel()  # noqa: E731
    assert len(largest) == 3 and min(map(size, largest)) == sorted(map(size, epoch))[-3]


def test_decoding_batches_cut_the_first_sources_sorted_by_length():
    lengths = np.array([9, 3, 7, 5, 4, 8, 30])
    made = batches.decoding_batches(lengths, VOCAB, sentences=6, batch_size=4)
    assert [b.shape[0] for b in made] == [4, 2]
    real = [n for b in made for n in batches.real_lengths(b).tolist()]
    assert real == [3, 4, 5, 7, 8, 9]


def test_bucketed_batches_hold_one_length_and_the_token_count():
    for batch in batches.bucketed_batches(count=5, tokens=600, vocab=VOCAB):
        length = batch["src"].size(1) - 1  # the longest source: `length` words and EOS
        assert batch["src"].size(0) == 600 // length
        assert set(batches.real_lengths(batch["tgt_out"]).tolist()) == {length, length + 1}
