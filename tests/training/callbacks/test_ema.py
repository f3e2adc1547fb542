"""callbacks=ema: checkpoints hold the moving average of the trained weights, and resume."""

import signal
from pathlib import Path

import lightning as L
import pytest
import torch

from helpers.ddp import (
    BatchesPerRank,
    SaveWeightsPerRank,
    assert_same_weights,
    batch,
    sentences,
    tiny_module,
)
from helpers.hydra_compose import compose_train
from helpers.signal_at_step import signal_at
from transformer_nmt.train import build_data_and_module, build_trainer, fit, train
from transformer_nmt.training.callbacks.checkpoint_policy import CheckpointPolicy
from transformer_nmt.training.callbacks.ema import WeightEMA
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.plan.run_plan import check_config, plan_run
from transformer_nmt.training.run.stop import Stopped

DECAY, START = 0.8, 4
# 15 toy batches an epoch: 20 updates validate once, at update 15, between start and end.
# Without attention maps: drawing them would take most of a run's time.
PLAIN = ["experiment=toy", "logger=none", "trainer.max_steps=20", "~callbacks.attention_maps"]
EMA = [*PLAIN, "callbacks=ema", f"callbacks.ema.decay={DECAY}", f"callbacks.ema.start_step={START}"]


class TrainedWeights(L.Callback):
    """The module's weights after each update, by update count."""

    def __init__(self) -> None:
        self.after: dict[int, dict[str, torch.Tensor]] = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        weights = pl_module.state_dict()
        self.after[trainer.global_step] = {k: v.detach().clone() for k, v in weights.items()}


def run(tmp_path: Path, *overrides: str) -> tuple[TrainedWeights, L.LightningModule]:
    cfg = compose_train(tmp_path, list(overrides))
    L.seed_everything(cfg.seed, workers=True)
    plan = plan_run(cfg)
    resume = ResumePoint(plan.resume_from)
    datamodule, module = build_data_and_module(cfg, plan, resume)
    trainer = build_trainer(cfg, [], plan)
    recorder = TrainedWeights()
    trainer.callbacks.append(recorder)
    fit(trainer, module, datamodule, resume)
    return recorder, module


def reference_ema(trained: TrainedWeights, until: int) -> dict[str, torch.Tensor]:
    """The average by its definition, in float64: a copy after update START + 1, then a lerp."""
    average = None
    for step in range(START + 1, until + 1):
        weights = {k: v.double() for k, v in trained.after[step].items()}
        if average is None:
            average = weights
        else:
            average = {k: DECAY * average[k] + (1 - DECAY) * weights[k] for k in average}
    return average


def assert_weights_equal(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(actual[key].double(), value.double(), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def twenty_updates(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("ema")
    trained, module = run(tmp_path, *EMA)
    return tmp_path / "run" / "checkpoints", trained, module


def test_checkpoints_hold_the_average_and_the_trained_weights(twenty_updates):
    checkpoints, trained, _ = twenty_updates
    last = torch.load(checkpoints / "last.ckpt", weights_only=True)
    assert last["global_step"] == 20
    assert_weights_equal(last["state_dict"], reference_ema(trained, 20))
    assert_weights_equal(last["current_model_state"], trained.after[20])
    # The one validation's checkpoint, saved at update 15.
    (best,) = checkpoints.glob("step15-bleu*.ckpt")
    saved = torch.load(best, weights_only=True)["state_dict"]
    assert_weights_equal(saved, reference_ema(trained, 15))


def test_after_fit_the_model_holds_the_average(twenty_updates):
    _, trained, module = twenty_updates
    assert_weights_equal(module.state_dict(), reference_ema(trained, 20))


def test_the_average_does_not_change_training(twenty_updates, tmp_path):
    # Validating on the average swaps the weights out and back: the trained ones must come back
    # bit for bit, so training goes on as it would without the callback.
    _, trained, _ = twenty_updates
    plain, _ = run(tmp_path, *PLAIN)
    for key, value in plain.after[20].items():
        assert torch.equal(trained.after[20][key], value), key


def test_a_resumed_run_ends_with_the_uninterrupted_runs_average(twenty_updates, tmp_path):
    # Stopped mid-epoch by a SIGTERM as update 10 starts, as a cluster pre-empts a run.
    checkpoints, _, _ = twenty_updates
    with pytest.raises(Stopped):
        run(tmp_path / "first", *EMA, *signal_at(10, signal.SIGTERM))
    halfway = tmp_path / "first" / "run" / "checkpoints" / "last.ckpt"
    run(tmp_path / "second", *EMA, f"ckpt_path={halfway}")

    resumed = tmp_path / "second" / "run" / "checkpoints" / "last.ckpt"
    resumed = torch.load(resumed, weights_only=True)
    whole = torch.load(checkpoints / "last.ckpt", weights_only=True)
    assert resumed["averaging_state"]["n_averaged"] == whole["averaging_state"]["n_averaged"] == 16
    for key in ("state_dict", "current_model_state"):
        for name, value in whole[key].items():
            torch.testing.assert_close(resumed[key][name], value, rtol=1e-4, atol=1e-5)


def test_resuming_an_averaged_run_without_the_callback_is_refused(twenty_updates, tmp_path):
    checkpoints, _, _ = twenty_updates
    last = checkpoints / "last.ckpt"
    with pytest.raises(ConfigError, match=f"ckpt_path={last} was trained with callbacks=ema"):
        train(compose_train(tmp_path, [*PLAIN, f"ckpt_path={last}"]))


def test_the_averaging_callback_is_found_under_any_key(twenty_updates, tmp_path):
    checkpoints, _, _ = twenty_updates
    target = "transformer_nmt.training.callbacks.ema.WeightEMA"
    cfg = compose_train(
        tmp_path,
        [
            *PLAIN,
            f"+callbacks.average._target_={target}",
            f"+callbacks.average.decay={DECAY}",
            f"ckpt_path={checkpoints / 'last.ckpt'}",
        ],
    )
    check_config(cfg)  # not refused


@pytest.mark.parametrize(("decay", "start_step"), [(1.0, 0), (-0.1, 0), (0.9, -1)])
def test_settings_out_of_range_are_refused_naming_the_option(decay, start_step):
    with pytest.raises(ValueError, match="callbacks.ema"):
        WeightEMA(decay=decay, start_step=start_step)


def test_before_its_start_the_trained_weights_stand_in_for_the_average(tmp_path):
    trained, _ = run(tmp_path, *PLAIN, "callbacks=ema", "callbacks.ema.start_step=16")
    checkpoints = tmp_path / "run" / "checkpoints"
    (best,) = checkpoints.glob("step15-bleu*.ckpt")  # validated and saved before update 17
    saved = torch.load(best, weights_only=True)
    assert "current_model_state" not in saved
    assert_weights_equal(saved["state_dict"], trained.after[15])
    last = torch.load(checkpoints / "last.ckpt", weights_only=True)
    assert last["averaging_state"]["n_averaged"] == 4  # after updates 17 to 20


class TrainedWeightsPerRank(TrainedWeights):
    """`TrainedWeights` written to `<dirpath>/trained<global rank>.pt` as training ends: under
    ddp_spawn each rank's callbacks live in another process."""

    def __init__(self, dirpath: Path) -> None:
        super().__init__()
        self.dirpath = dirpath

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        torch.save(self.after, self.dirpath / f"trained{trainer.global_rank}.pt")


@pytest.mark.slow
def test_under_ddp_the_ranks_average_alike_and_rank_zero_saves_the_average(tmp_path):
    # ddp_spawn pickles the callbacks into its processes, as it does in a sweep's trials.
    updates = 7
    groups = sentences(*([3 + i % 5, 4 + i % 7] for i in range(2 * updates)))
    ranks = [[batch(g) for g in groups[0::2]], [batch(g) for g in groups[1::2]]]
    trainer = L.Trainer(
        accelerator="cpu", devices=2, strategy="ddp_spawn", max_steps=updates,
        precision="32-true", logger=False, enable_progress_bar=False, enable_model_summary=False,
        use_distributed_sampler=False,
        callbacks=[
            WeightEMA(decay=DECAY, start_step=START),
            TrainedWeightsPerRank(tmp_path),
            SaveWeightsPerRank(str(tmp_path)),  # after WeightEMA: the average it swaps in
            # last.ckpt only, as training ends: the trained weights beside the average.
            CheckpointPolicy(str(tmp_path / "checkpoints"), monitor=None, every_minutes=None),
        ],
    )  # fmt: skip
    trainer.fit(tiny_module(warmup_steps=4), train_dataloaders=BatchesPerRank(ranks))

    (checkpoint,) = (tmp_path / "checkpoints").glob("*.ckpt")
    saved = torch.load(checkpoint, weights_only=True)
    trained = TrainedWeights()
    trained.after = torch.load(tmp_path / "trained0.pt")
    assert saved["averaging_state"]["n_averaged"] == updates - START
    assert_weights_equal(saved["state_dict"], reference_ema(trained, updates))
    assert_weights_equal(saved["current_model_state"], trained.after[updates])
    for name, average in assert_same_weights(tmp_path).items():
        assert torch.equal(saved["state_dict"][name], average), name
    other = torch.load(tmp_path / "trained1.pt")[updates]
    for name, weights in trained.after[updates].items():
        assert torch.equal(other[name], weights), name
