"""`trainer.max_time` ends the run on every rank after the same update, on global rank 0's
clock, agreed on the step's all_reduce; a checkpoint keeps the clock as Lightning's Timer did."""

import subprocess
import sys

import pytest
import torch

from helpers.ddp import assert_same_weights, ddp_env, weights_callback
from helpers.hydra_compose import ROOT
from helpers.step_clock import tick

# A 100-second budget on a clock that moves 2 s as each batch starts: 50 updates.
BUDGET = [
    "experiment=toy", "logger=none", "data.max_tokens=256", "trainer.precision=32-true",
    "trainer.max_epochs=-1", "trainer.max_steps=-1", "trainer.max_time=00:00:01:40",
    "+trainer.limit_val_batches=0", "+trainer.num_sanity_val_steps=0",
    "~callbacks.attention_maps", "~callbacks.translation_table",
]  # fmt: skip


@pytest.mark.slow
def test_ddp_ranks_end_the_time_budget_after_the_same_update_on_rank_zeros_clock(tmp_path):
    # Rank 1's clock runs 1.5 times as fast: on its own it would stop after update 34.
    subprocess.run(
        [
            sys.executable, "train.py", *BUDGET, *tick(2.0, skew=0.5),
            "trainer=ddp_cpu", "trainer.devices=2", f"hydra.run.dir={tmp_path}/run",
            f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache",
            *weights_callback(tmp_path / "weights"),
        ],
        cwd=ROOT, env=ddp_env(), check=True, timeout=300, capture_output=True,
    )  # fmt: skip
    assert_same_weights(tmp_path / "weights")
    last = torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=True)
    assert last["global_step"] == 50
    # Under Lightning's Timer's key: a resume, also from its checkpoints, keeps the clock.
    assert last["callbacks"]["Timer"]["time_elapsed"]["train"] == 100.0
