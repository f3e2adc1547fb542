"""`data.max_tokens=auto`: a real training step, measured against an injected memory limit."""

import contextlib
import logging
import re

import pytest
import torch

from helpers.hydra_compose import compose_train
from transformer_nmt.data.token_budget import CPU_MAX_TOKENS, BudgetError
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.model import Transformer
from transformer_nmt.train import train
from transformer_nmt.training.callbacks.auto_max_tokens import (
    HostMemory,
    StepProbe,
    search_max_tokens,
)

LONGEST = 24  # tokens a side of the longest pair, EOS included
MARGIN = 0.1


@pytest.fixture(scope="module")
def probe() -> StepProbe:
    torch.manual_seed(0)
    model = Transformer(512, PAD_ID, N=1, d_model=32, d_ff=64, h=2)
    probe = StepProbe(model, torch.device("cpu"), "32-true", contextlib.nullcontext, LONGEST)
    probe(LONGEST)  # Adam's state exists from here on, as after the search's first step
    return probe


def peak(probe: StepProbe, rows: int) -> float:
    return HostMemory(limit=0).peak(lambda: probe(rows * LONGEST), probe.resident())


def test_the_search_finds_the_largest_budget_under_the_limit(probe):
    peaks = [peak(probe, rows) for rows in (1, 2, 3, 4, 5)]
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]  # more rows, more memory
    # A limit between 3 and 4 rows' peaks, the margin taken off: 3 rows is the answer.
    allowed = (peaks[2] + peaks[3]) / 2
    memory = HostMemory(limit=int(allowed / (1 - MARGIN)))
    assert search_max_tokens(probe, memory, cap=100 * LONGEST, margin=MARGIN) == 3 * LONGEST


def test_a_limit_below_one_longest_pair_fails_naming_it(probe):
    memory = HostMemory(limit=int(peak(probe, 1) / 2))
    with pytest.raises(BudgetError, match=f"the longest training pair, {LONGEST} tokens a side"):
        search_max_tokens(probe, memory, cap=100 * LONGEST, margin=MARGIN)


TOY = ["experiment=toy", "logger=none", "trainer.max_steps=1", "trainer.max_epochs=-1"]
AUTO = ["data.max_tokens=auto", "+trainer.limit_val_batches=1"]


@pytest.mark.slow
def test_auto_on_a_cpu_trains_with_the_default_and_derives_the_accumulation(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        train(compose_train(tmp_path, [*TOY, *AUTO, "data.tokens_per_update=20000"]))
    assert f"data.max_tokens=auto: {CPU_MAX_TOKENS} tokens a side per batch" in caplog.text
    assert "accumulate_grad_batches=5" in caplog.text  # 20,000 over 4,096, rounded up


@pytest.mark.slow
def test_auto_with_a_memory_limit_searches_on_the_training_step(tmp_path, caplog):
    limit = ["callbacks.auto_max_tokens.memory_limit=2000000000", "data.tokens_per_update=1000"]
    with caplog.at_level(logging.INFO):
        train(compose_train(tmp_path, [*TOY, *AUTO, *limit]))
    found = re.search(
        r"data.max_tokens=auto: (\d+) tokens .* accumulate_grad_batches=(\d+)", caplog.text
    )
    budget, accumulate = int(found[1]), int(found[2])
    assert 500 < budget <= 1000  # 2 GB holds more: the tokens per update cap it
    assert accumulate == -(-1000 // budget)
