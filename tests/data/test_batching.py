import numpy as np
import pytest
import torch

from transformer_nmt.data.batching import TokenBatchSampler, collate
from transformer_nmt.data.padding import rounding_multiple
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID


def random_lengths(n: int = 2000, seed: int = 0) -> tuple[list[int], list[int]]:
    """Source lengths 2..80 and target lengths near them, like real bitext."""
    rng = np.random.default_rng(seed)
    src = rng.integers(2, 81, size=n)
    tgt = np.clip(src + rng.integers(-5, 6, size=n), 2, 80)
    return src.tolist(), tgt.tolist()


def padded_share(batches, src, tgt) -> float:
    """Fraction of the padded (B, S) and (B, T) tensors that is padding."""
    real = padded = 0
    for batch in batches:
        for lengths in (src, tgt):
            batch_lengths = [lengths[i] for i in batch]
            real += sum(batch_lengths)
            padded += len(batch) * max(batch_lengths)
    return 1 - real / padded


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_index_once_per_epoch_within_budget(shuffle):
    src, tgt = random_lengths()
    sampler = TokenBatchSampler(src, tgt, max_tokens=500, shuffle=shuffle, seed=1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        for b in batches:
            examples = [
                {"src": [5] * (src[i] - 1) + [EOS_ID], "tgt": [5] * (tgt[i] - 1)} for i in b
            ]
            padded = collate(examples, pad_id=0)
            assert padded["src"].numel() <= 500 and padded["tgt_in"].numel() <= 500


def test_batches_are_filled_greedily():
    sampler = TokenBatchSampler([10] * 10, [4] * 10, max_tokens=35)
    assert sorted(map(len, sampler)) == [1, 3, 3, 3]


def test_same_seed_and_epoch_give_the_same_batches():
    src, tgt = random_lengths()
    a = TokenBatchSampler(src, tgt, max_tokens=500, seed=7)
    b = TokenBatchSampler(src, tgt, max_tokens=500, seed=7)
    a.set_epoch(3)
    b.set_epoch(3)
    assert list(a) == list(b)
    c = TokenBatchSampler(src, tgt, max_tokens=500, seed=8)
    c.set_epoch(3)
    assert list(c) != list(a)


def test_order_and_tie_breaks_change_across_epochs_but_not_the_count():
    src, tgt = random_lengths()
    sampler = TokenBatchSampler(src, tgt, max_tokens=500)
    epoch0 = list(sampler)
    sampler.set_epoch(1)
    epoch1 = list(sampler)
    assert len(epoch0) == len(epoch1) == len(sampler)
    assert epoch0 != epoch1
    # Identical lengths are shuffled too: batch contents change, not only their order.
    assert {tuple(sorted(b)) for b in epoch0} != {tuple(sorted(b)) for b in epoch1}


def test_without_shuffle_batches_run_shortest_first_every_epoch():
    src, tgt = random_lengths()
    sampler = TokenBatchSampler(src, tgt, max_tokens=500, shuffle=False)
    epoch0 = list(sampler)
    sampler.set_epoch(5)
    assert list(sampler) == epoch0
    longest = [max(max(src[i], tgt[i]) for i in b) for b in epoch0]
    assert longest == sorted(longest)


def test_length_grouping_wastes_far_less_than_random_batches():
    src, tgt = random_lengths()
    batches = list(TokenBatchSampler(src, tgt, max_tokens=1000))
    permutation = np.random.default_rng(0).permutation(len(src)).tolist()
    random_batches, start = [], 0
    for b in batches:  # the same batch sizes, filled at random
        random_batches.append(permutation[start : start + len(b)])
        start += len(b)
    grouped = padded_share(batches, src, tgt)
    assert grouped < 0.1
    assert grouped < padded_share(random_batches, src, tgt) / 4


def test_an_example_over_budget_is_named():
    with pytest.raises(ValueError, match="example 1 has 60 tokens, more than max_tokens=50"):
        TokenBatchSampler([3, 60, 4], [3, 5, 4], max_tokens=50)


def test_empty_dataset_gives_no_batches():
    sampler = TokenBatchSampler([], [], max_tokens=10)
    assert len(sampler) == 0
    assert list(sampler) == []


def test_lightning_finds_set_epoch_through_batch_sampler_sampler():
    from lightning.fabric.utilities.data import _set_sampler_epoch

    sampler = TokenBatchSampler([3, 4], [3, 4], max_tokens=10)
    loader = torch.utils.data.DataLoader(range(2), batch_sampler=sampler)
    _set_sampler_epoch(loader, 4)
    assert sampler.epoch == 4


def shards(world_size: int, src, tgt, **kwargs) -> list[TokenBatchSampler]:
    return [
        TokenBatchSampler(src, tgt, rank=r, world_size=world_size, **kwargs)
        for r in range(world_size)
    ]


@pytest.mark.parametrize("world_size", range(1, 9))
@pytest.mark.parametrize("n", [8, 13, 101, 997])
@pytest.mark.parametrize("shuffle", [True, False])
def test_ranks_share_every_index_once_in_equal_batch_counts(world_size, n, shuffle):
    src, tgt = random_lengths(n, seed=n)
    samplers = shards(world_size, src, tgt, max_tokens=300, shuffle=shuffle, seed=3)
    for epoch in range(2):
        per_rank = []
        for sampler in samplers:
            sampler.set_epoch(epoch)
            per_rank.append(list(sampler))
        # Equal step counts on every rank, or DDP hangs in a collective.
        assert {len(b) for b in per_rank} == {len(samplers[0])}
        indices = [i for batches in per_rank for b in batches for i in b]
        assert sorted(indices) == list(range(n))  # disjoint, nothing repeated or dropped
        for b in (b for batches in per_rank for b in batches):
            assert len(b) * max(max(src[i], tgt[i]) for i in b) <= 300


def test_ranks_get_similar_token_counts():
    src, tgt = random_lengths(5000)
    tokens = [
        sum(len(b) * max(max(src[i], tgt[i]) for i in b) for b in sampler)
        for sampler in shards(4, src, tgt, max_tokens=1000)
    ]
    assert max(tokens) < 1.05 * min(tokens)


def test_fewer_examples_than_ranks_is_refused():
    with pytest.raises(ValueError, match="3 examples cannot fill the same number of batches"):
        TokenBatchSampler([3, 4, 5], [3, 4, 5], max_tokens=100, world_size=4)


@pytest.mark.parametrize("world_size", [1, 3])
def test_restored_state_resumes_the_same_epoch_order(world_size):
    src, tgt = random_lengths()
    sampler = TokenBatchSampler(
        src, tgt, max_tokens=500, seed=5, rank=1 % world_size, world_size=world_size
    )
    sampler.set_epoch(2)
    iterator = iter(sampler)
    seen = [next(iterator) for _ in range(4)]
    state = sampler.state_dict()

    resumed = TokenBatchSampler(
        src, tgt, max_tokens=500, seed=5, rank=1 % world_size, world_size=world_size
    )
    resumed.load_state_dict(state)
    assert resumed.epoch == 2
    assert seen + list(resumed) == sampler.batches()
    # The restored position holds for one pass only: the next epoch starts from its beginning.
    resumed.set_epoch(3)
    assert len(list(resumed)) == len(resumed)


def test_state_from_another_world_size_is_refused():
    src, tgt = random_lengths(100)
    state = TokenBatchSampler(src, tgt, max_tokens=500, world_size=2).state_dict()
    with pytest.raises(ValueError, match="world_size=2 under world_size=1"):
        TokenBatchSampler(src, tgt, max_tokens=500).load_state_dict(state)


def test_collate_pads_and_adds_bos_and_eos():
    examples = [
        {"src": [5, 6, EOS_ID], "tgt": [7], "src_text": "a b", "tgt_text": "c"},
        {"src": [8, EOS_ID], "tgt": [9, 10, 11], "src_text": "d", "tgt_text": "e f g"},
    ]
    batch = collate(examples, pad_id=0)
    assert batch["src"].dtype == batch["tgt_in"].dtype == batch["tgt_out"].dtype == torch.long
    assert batch["src"].tolist() == [[5, 6, EOS_ID], [8, EOS_ID, 0]]
    assert batch["tgt_in"].tolist() == [[BOS_ID, 7, 0, 0], [BOS_ID, 9, 10, 11]]
    assert batch["tgt_out"].tolist() == [[7, EOS_ID, 0, 0], [9, 10, 11, EOS_ID]]
    assert batch["src_text"] == ["a b", "d"]
    assert batch["tgt_text"] == ["c", "e f g"]


def test_collate_pads_with_the_given_id_and_omits_absent_text():
    batch = collate(
        [{"src": [5, EOS_ID], "tgt": []}, {"src": [EOS_ID], "tgt": [4]}],
        pad_id=99,
    )
    assert batch["src"].tolist() == [[5, EOS_ID], [EOS_ID, 99]]
    assert batch["tgt_in"].tolist() == [[BOS_ID, 99], [BOS_ID, 4]]
    assert batch["tgt_out"].tolist() == [[EOS_ID, 99], [4, EOS_ID]]
    assert set(batch) == {"src", "tgt_in", "tgt_out", "tgt_index"}


def test_collate_rounds_lengths_up_and_indexes_the_real_target_positions():
    examples = [{"src": [5, 6, EOS_ID], "tgt": [7]}, {"src": [8, EOS_ID], "tgt": [9, 10, 11]}]
    batch = collate(examples, pad_id=0, pad_to_multiple_of=8)
    assert batch["src"].shape == batch["tgt_out"].shape == (2, 8)
    assert batch["src"][:, 3:].eq(0).all() and batch["tgt_in"][:, 4:].eq(0).all()
    flat = batch["tgt_out"].flatten()
    assert batch["tgt_index"].tolist() == (flat != 0).nonzero().flatten().tolist()
    assert flat[batch["tgt_index"]].tolist() == [7, EOS_ID, 9, 10, 11, EOS_ID]


def test_rounding_keeps_every_side_within_an_eighth_over_the_budget():
    src, tgt = random_lengths()
    multiples = set()
    for b in TokenBatchSampler(src, tgt, max_tokens=500):
        examples = [{"src": [5] * (src[i] - 1) + [EOS_ID], "tgt": [5] * (tgt[i] - 1)} for i in b]
        padded = collate(examples, pad_id=0, pad_to_multiple_of=8, max_tokens=500)
        for side, lengths in (("src", src), ("tgt_in", tgt)):
            rows, width = padded[side].shape
            longest = max(lengths[i] for i in b)
            multiple = rounding_multiple(rows, longest, 8, max_tokens=500)
            assert width == -(-longest // multiple) * multiple
            assert rows * width <= 500 * 9 / 8
            # The coarsest that fits: the next coarser multiple would pass the allowance.
            coarser = -(-longest // (2 * multiple)) * 2 * multiple
            assert multiple == 8 or rows * coarser > 500 * 9 / 8
            multiples.add(multiple)
    assert 8 in multiples and len(multiples) > 1
