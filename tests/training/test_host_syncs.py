"""The training step waits for the device once per step, and a few times per logging step."""

import json

import pytest
import torch
from omegaconf import open_dict

from helpers.hydra_compose import compose_train
from transformer_nmt.train import train

LOG_EVERY = 4
ACCELERATOR = {"cpu": "cpu", "cuda": "gpu"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
        ),
    ],
)
def test_a_training_step_syncs_once_and_a_logging_step_a_few_times(tmp_path, device):
    """Over 12 steps; on a CPU counted as a GPU would sync (helpers.sync_counting.SyncCounter)."""
    cfg = compose_train(
        tmp_path,
        [
            "experiment=toy", "logger=csv", "data.corpus.num_train=300",
            "data.max_tokens=192", "trainer.max_epochs=-1", "trainer.max_steps=13",
            "+trainer.limit_val_batches=0", "+trainer.num_sanity_val_steps=0",
            f"trainer.log_every_n_steps={LOG_EVERY}", "+trainer.enable_progress_bar=true",
            "trainer.precision=32-true", f"trainer.accelerator={ACCELERATOR[device]}",
            "+callbacks.syncs._target_=helpers.sync_counting.SyncsPerBatch",
            f"+callbacks.syncs.path={tmp_path}/syncs.json", f"+callbacks.syncs.device={device}",
        ],
    )  # fmt: skip
    with open_dict(cfg):
        del cfg.hydra  # the CSV logger records the resolved config, but no sweep runs here
    train(cfg)
    counts = json.loads((tmp_path / "syncs.json").read_text())
    per_batch, where = counts["per_batch"], counts["where"]
    # Lightning writes logs after the batches that start with LOG_EVERY - 1, 2 LOG_EVERY - 1...
    # steps done.
    logging = [n for step, n in per_batch if (step + 1) % LOG_EVERY == 0]
    others = [n for step, n in per_batch if (step + 1) % LOG_EVERY]
    assert len(logging) == 3 and len(others) >= 8, per_batch
    # The finite-loss check: one read of one all-reduced flag.
    assert others == [1] * len(others), where
    # Plus the train metrics brought to the host at once, the global tokens/s put on the device,
    # the periodic checkpoint's clock broadcast, and the logger's reads of the 4 device metrics
    # (grad norm, pad shares, global tokens/s).
    assert max(logging) <= 8, (per_batch, where)
