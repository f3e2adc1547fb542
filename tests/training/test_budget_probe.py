"""`data.max_tokens=auto` measured: real training steps against an injected memory limit."""

import contextlib
import functools

import pytest
import torch

from transformer_nmt.data.token_budget import BudgetError
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.model import Transformer
from transformer_nmt.training.plan.budget_probe import (
    HostMemory,
    StepProbe,
    is_out_of_memory,
    measure_budget,
)

LONGEST, SHORTEST = 24, 2  # tokens a side of the longest and shortest pair, EOS included
CAP = 8 * LONGEST
MARGIN = 0.1
CUBLAS = "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(512, PAD_ID, N=1, d_model=32, d_ff=64, h=2)


def make_probe(model, lengths=(LONGEST,), pad_to_multiple_of=1, rdrop=False) -> StepProbe:
    cpu, fp32 = torch.device("cpu"), "32-true"
    probe = StepProbe(model, cpu, fp32, contextlib.nullcontext, lengths, pad_to_multiple_of, rdrop)
    probe(LONGEST)  # Adam's state exists from here on, as after the search's first step
    return probe


@pytest.fixture(scope="module")
def probe(model) -> StepProbe:
    return make_probe(model)


def peak(probe: StepProbe, budget: int, length: int = LONGEST) -> float:
    return HostMemory(limit=0).peak(functools.partial(probe, budget, length), probe.resident())


def allowing(allowed: float) -> HostMemory:
    """A host whose free memory, the margin taken off, is `allowed`."""
    return HostMemory(limit=int(allowed / (1 - MARGIN)))


def test_the_search_finds_the_largest_budget_under_the_limit(probe):
    peaks = [peak(probe, rows * LONGEST) for rows in (1, 2, 3, 4, 5)]
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]  # more rows, more memory
    # A limit between 3 and 4 rows' peaks, the margin taken off: 3 rows is the answer.
    measured = measure_budget(probe, allowing((peaks[2] + peaks[3]) / 2), CAP, MARGIN)
    assert measured.max_tokens == 3 * LONGEST and measured.binding == LONGEST


def test_a_limit_below_one_longest_pair_fails_naming_it(probe):
    memory = HostMemory(limit=int(peak(probe, LONGEST) / 2))
    with pytest.raises(BudgetError, match=f"the longest training pair, {LONGEST} tokens a side"):
        measure_budget(probe, memory, CAP, MARGIN)


def test_with_r_drop_on_the_short_bucket_binds_where_padding_makes_it_so(model):
    """Pairs of 2 tokens padded to 8 hold 4x the budget's positions: under a limit the longest
    pairs' step fits, the shortest pairs' padded step bounds the budget."""
    rdrop = make_probe(model, (SHORTEST, LONGEST), pad_to_multiple_of=8, rdrop=True)
    plain = make_probe(model, (SHORTEST, LONGEST), pad_to_multiple_of=8)
    assert peak(rdrop, 4 * LONGEST) > 1.5 * peak(plain, 4 * LONGEST)  # the doubled batch
    # The longest pairs' R-Drop step fits 6 rows under this limit, not 7.
    allowed = (peak(rdrop, 6 * LONGEST) + peak(rdrop, 7 * LONGEST)) / 2

    both = measure_budget(rdrop, allowing(allowed), CAP, MARGIN)
    assert both.binding == SHORTEST and both.max_tokens < 6 * LONGEST
    assert both.rdrop and max(both.peak_bytes.values()) <= allowed
    assert peak(rdrop, both.max_tokens + LONGEST, SHORTEST) > allowed  # the largest that fits

    # Unpadded, the same short pairs fit where padded ones did not: the padding bound it.
    unpadded = make_probe(model, (SHORTEST, LONGEST), pad_to_multiple_of=1, rdrop=True)
    assert peak(unpadded, both.max_tokens + LONGEST, SHORTEST) <= allowed


def test_a_cublas_allocation_failure_counts_as_not_fitting(model):
    probe = make_probe(model)

    def cublas_fails_beyond_3_rows(module, args):
        if args[0].shape[0] > 3:
            raise RuntimeError(CUBLAS)

    hook = probe.model.register_forward_pre_hook(cublas_fails_beyond_3_rows)
    measured = measure_budget(probe, HostMemory(limit=2**40), CAP, MARGIN)
    assert measured.max_tokens == 3 * LONGEST and measured.binding == LONGEST
    assert all(p.grad is None for p in probe.model.parameters())  # none left by a failed step
    hook.remove()


def test_an_error_other_than_memory_is_raised_not_taken_for_a_full_device(model):
    probe = make_probe(model)

    def fails(module, args):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    probe.model.register_forward_pre_hook(fails)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        measure_budget(probe, HostMemory(limit=2**40), CAP, MARGIN)


@pytest.mark.parametrize(
    "error, out_of_memory",
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError(CUBLAS), True),
        (RuntimeError("CUDA error: out of memory"), True),
        (
            RuntimeError("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasSgemm"),
            False,
        ),
        (ValueError("CUDA out of memory"), False),  # not what torch raises
    ],
)
def test_what_counts_as_out_of_memory(error, out_of_memory):
    assert is_out_of_memory(error) is out_of_memory
