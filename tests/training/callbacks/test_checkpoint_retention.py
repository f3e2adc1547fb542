"""Periodic checkpoints: the last K kept for averaging, without optimizer state."""

import logging

import pytest

from helpers.hydra_compose import compose_train
from transformer_nmt.checkpoint import read_checkpoint
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.train import train
from transformer_nmt.training.config_checks import ConfigError, check_config

EVERY_2_STEPS = [
    "experiment=toy", "logger=none", "data.corpus.num_train=300", "data.max_tokens=192",
    "trainer.max_epochs=-1", "trainer.max_steps=10", "+trainer.num_sanity_val_steps=0",
    "+trainer.limit_val_batches=0", "~callbacks.model_checkpoint",
    "callbacks.periodic_checkpoint.train_time_interval.minutes=0",
    "callbacks.periodic_checkpoint.check_every_n_steps=2",
]  # fmt: skip


@pytest.mark.slow
def test_the_last_k_are_kept_without_optimizer_state_and_average(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        train(compose_train(tmp_path, [*EVERY_2_STEPS, "average_last=3"]))
    assert "the last 3 periodic ones of ~0.00 GB" in caplog.text  # the disk they will take
    checkpoints = tmp_path / "run" / "checkpoints"
    # Saved at steps 2, 4, 6, 8 and 10: the two oldest deleted.
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "last.ckpt", "step10.ckpt", "step6.ckpt", "step8.ckpt"
    ]  # fmt: skip
    assert "optimizer_states" in read_checkpoint(checkpoints / "last.ckpt")
    for name in ["step6.ckpt", "step8.ckpt", "step10.ckpt"]:
        assert "optimizer_states" not in read_checkpoint(checkpoints / name)
    source, reference = tmp_path / "src.en", tmp_path / "ref.de"
    source.write_text("three one four\nnine two\n")
    reference.write_text("drei eins vier\nneun zwei\n")
    out = tmp_path / "eval"
    evaluate_main([str(checkpoints), "--average-last", "3", "--src", str(source), "--ref",
                   str(reference), "--output-dir", str(out), "--device", "cpu"])  # fmt: skip
    assert len((out / "hypotheses.txt").read_text().splitlines()) == 2


def test_keeping_fewer_than_the_recipe_averages_is_refused(tmp_path):
    cfg = compose_train(tmp_path, ["experiment=toy", "callbacks.periodic_checkpoint.keep_last=4"])
    with pytest.raises(ConfigError, match=r"keep_last=4 keeps fewer .* average_last=5"):
        check_config(cfg)
    big = compose_train(tmp_path, ["experiment=toy", "model=big", "average_last=20"])
    assert big.callbacks.periodic_checkpoint.keep_last == 20  # follows the average by default
