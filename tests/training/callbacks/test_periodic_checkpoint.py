import pytest

from helpers.hydra_compose import compose_train
from transformer_nmt.train import train


@pytest.mark.slow
def test_a_timed_checkpoint_looks_at_the_clock_every_n_steps_only(tmp_path):
    """With a zero interval every look saves, so the checkpoints show when it looked."""
    overrides = [
        "experiment=toy", "logger=none", "data.corpus.num_train=300", "data.max_tokens=192",
        "trainer.max_epochs=-1", "trainer.max_steps=8", "+trainer.num_sanity_val_steps=0",
        "+trainer.limit_val_batches=0",
        "callbacks.periodic_checkpoint.train_time_interval.minutes=0",
        "callbacks.periodic_checkpoint.check_every_n_steps=3",
    ]  # fmt: skip
    train(compose_train(tmp_path, overrides))
    saved = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert saved == ["last.ckpt", "step3.ckpt", "step6.ckpt"]
