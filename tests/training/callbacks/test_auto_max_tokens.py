"""`data.max_tokens=auto` resolved as fit sets up: the CPU default, a searched budget, R-Drop."""

import json
import logging
import re
from types import SimpleNamespace

import lightning as L
import pytest

from helpers.hydra_compose import compose_train
from helpers.trainer_record import record_trainer
from transformer_nmt.data.token_budget import CPU_MAX_TOKENS, BudgetError
from transformer_nmt.train import train
from transformer_nmt.training.callbacks.auto_max_tokens import may_train_with_rdrop
from transformer_nmt.training.callbacks.late_dropout import LateDropout


@pytest.mark.parametrize(
    "module_alpha, late_alpha, expected",
    [(0, None, False), (0.5, None, True), (0, 1.0, True), (0, 0, False)],
)
def test_r_drop_counts_from_the_start_or_once_late_dropout_turns_it_on(
    module_alpha, late_alpha, expected
):
    late = LateDropout(p=0.3, after_minutes=1, rdrop_alpha=late_alpha)
    trainer = L.Trainer(callbacks=[late], logger=False, enable_checkpointing=False)
    assert may_train_with_rdrop(trainer, SimpleNamespace(rdrop_alpha=module_alpha)) is expected


TOY = ["experiment=toy", "logger=none", "trainer.max_steps=1", "trainer.max_epochs=-1"]
AUTO = ["data.max_tokens=auto", "+trainer.limit_val_batches=1"]
LIMIT = "callbacks.auto_max_tokens.memory_limit"


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
    assert "the cap bound it" in caplog.text


@pytest.mark.slow
def test_an_auto_run_resumed_keeps_its_budget_where_it_fits_and_is_refused_where_not(
    tmp_path, caplog
):
    """The budget is measured once: batches after a resume are those the checkpoint counted,
    confirmed to fit the memory the resumed run finds, else refused before any write."""
    # A small cap the first search reaches in one step, in fp32: a quick start.
    quick = [*AUTO, "data.tokens_per_update=500", "trainer.precision=32-true"]
    first = [*TOY, *quick, f"{LIMIT}=2000000000", *record_trainer(tmp_path / "a")]
    train(compose_train(tmp_path, first))
    started = json.loads((tmp_path / "a").read_text())["max_tokens"]
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    saved = last.read_bytes()
    toy = ["experiment=toy", "logger=none", "trainer.max_steps=2", "trainer.max_epochs=-1"]
    resume = [*toy, *quick, f"ckpt_path={last}"]
    # 6 MB, 5.4 allowed: the toy's longest pair alone peaks near 3.3 MB, a batch of 500 near 11.
    with pytest.raises(BudgetError) as refused:
        train(compose_train(tmp_path, [*resume, f"{LIMIT}=6000000"]))
    assert f"{last} trains batches of {started} tokens a side" in str(refused.value)
    assert f"init=continue init.from={last} (its optimizer" in str(refused.value)
    assert last.read_bytes() == saved
    with caplog.at_level(logging.INFO):
        train(
            compose_train(
                tmp_path, [*resume, f"{LIMIT}=3000000000", *record_trainer(tmp_path / "b")]
            )
        )
    assert json.loads((tmp_path / "b").read_text())["max_tokens"] == started
    assert f"data.max_tokens=auto: {started}, as measured when the run started, still fits" in (
        caplog.text
    )
