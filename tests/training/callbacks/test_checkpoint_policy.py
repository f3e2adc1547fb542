"""The one checkpoint policy: last.ckpt, the best, periodic checkpoints and their retention."""

import logging

import pytest

from helpers.hydra_compose import compose_train
from transformer_nmt.checkpoint import KIND_KEY, PERIODIC, last_checkpoints, read_checkpoint
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.train import train
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.run_plan import check_config

SMALL = [
    "experiment=toy", "logger=none", "data.corpus.num_train=300", "data.max_tokens=192",
    "trainer.max_epochs=-1", "+trainer.num_sanity_val_steps=0",
]  # fmt: skip
NO_VALIDATION = [*SMALL, "+trainer.limit_val_batches=0", "callbacks.checkpoints.monitor=null"]
EVERY_2_STEPS = [
    *NO_VALIDATION, "trainer.max_steps=10", "callbacks.checkpoints.every_minutes=0",
    "callbacks.checkpoints.check_every_n_steps=2",
]  # fmt: skip


def names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.slow
def test_the_last_k_are_kept_without_optimizer_state_and_average(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        train(compose_train(tmp_path, [*EVERY_2_STEPS, "average_last=3"]))
    assert "the last 3 periodic ones of ~0.00 GB" in caplog.text  # the disk they will take
    checkpoints = tmp_path / "run" / "checkpoints"
    # Saved at steps 2, 4, 6, 8 and 10: the two oldest deleted.
    assert names(checkpoints) == ["last.ckpt", "step10.ckpt", "step6.ckpt", "step8.ckpt"]
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


@pytest.mark.slow
def test_a_timed_checkpoint_looks_at_the_clock_every_n_steps_only(tmp_path):
    """With a zero interval every look saves, so the checkpoints show when it looked."""
    overrides = [
        *NO_VALIDATION, "trainer.max_steps=8", "callbacks.checkpoints.every_minutes=0",
        "callbacks.checkpoints.check_every_n_steps=3",
    ]  # fmt: skip
    train(compose_train(tmp_path, overrides))
    assert names(tmp_path / "run" / "checkpoints") == ["last.ckpt", "step3.ckpt", "step6.ckpt"]


@pytest.mark.slow
def test_each_file_is_written_by_one_policy_and_marked_with_its_kind(tmp_path):
    # Validation at steps 3 and 6, a periodic checkpoint every 2 steps, the last 2 kept.
    overrides = [
        *SMALL, "trainer.max_steps=7", "+trainer.limit_val_batches=1",
        "trainer.val_check_interval=3", "callbacks.checkpoints.every_n_steps=2", "average_last=2",
        "~callbacks.attention_maps", "~callbacks.translation_table",
    ]  # fmt: skip
    metrics = train(compose_train(tmp_path, overrides))
    checkpoints = tmp_path / "run" / "checkpoints"
    kinds = {p.name: read_checkpoint(p)[KIND_KEY] for p in checkpoints.iterdir()}
    (best,) = [name for name, kind in kinds.items() if kind == "best"]
    assert kinds == {
        "last.ckpt": "last",
        "step4.ckpt": PERIODIC,
        "step6.ckpt": PERIODIC,
        best: "best",
    }
    assert best in (f"step{step}-bleu{metrics['best/val/bleu']:.2f}.ckpt" for step in (3, 6))
    assert read_checkpoint(checkpoints / "last.ckpt")["global_step"] == 7  # the end, mid-epoch
    assert [p.name for p in last_checkpoints(checkpoints, 2)] == ["step4.ckpt", "step6.ckpt"]


@pytest.mark.slow
def test_a_run_resumed_in_its_folder_goes_on_deleting_its_oldest_periodic_checkpoints(tmp_path):
    every_2_keep_2 = [*NO_VALIDATION, "callbacks.checkpoints.every_n_steps=2", "average_last=2"]
    train(compose_train(tmp_path, [*every_2_keep_2, "trainer.max_steps=6"]))
    checkpoints = tmp_path / "run" / "checkpoints"
    assert names(checkpoints) == ["last.ckpt", "step4.ckpt", "step6.ckpt"]
    train(compose_train(tmp_path, [*every_2_keep_2, "trainer.max_steps=10"]))  # the same folder
    assert names(checkpoints) == ["last.ckpt", "step10.ckpt", "step8.ckpt"]


def test_keeping_fewer_than_the_recipe_averages_is_refused(tmp_path):
    cfg = compose_train(tmp_path, ["experiment=toy", "callbacks.checkpoints.keep_last=4"])
    with pytest.raises(ConfigError, match=r"keep_last=4 keeps fewer .* average_last=5"):
        check_config(cfg)
    big = compose_train(tmp_path, ["experiment=toy", "model=big", "average_last=20"])
    assert big.callbacks.checkpoints.keep_last == 20  # follows the average by default
