"""Sweeps: Optuna and grid multiruns of `train.py`, the W&B sweep file, and failed trials."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf, open_dict, read_write
from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

from hydra_compose import ROOT, compose_train
from transformer_nmt.training.loggers import group_wandb_runs_by_sweep
from transformer_nmt.training.sweeps import optimized_metric, raise_if_diverged

WANDB_SWEEP = ROOT / "experiments" / "sweeps" / "wandb_multi30k_de_en.yaml"
# The toy task, a few steps a trial: a sweep's mechanics, not its results.
FAST_TOY = [
    "experiment=toy",
    "logger=none",
    "~callbacks.attention_maps",
    "~callbacks.translation_table",
    "~callbacks.periodic_checkpoint",
    "trainer.max_epochs=1",
    "+trainer.limit_train_batches=3",
    "data.corpus.num_val=8",
]


def multirun(tmp_path: Path, overrides: list[str]) -> Path:
    """Runs `python train.py -m` as a user does; returns the sweep folder."""
    run = subprocess.run(
        [
            sys.executable,
            "train.py",
            "-m",
            *FAST_TOY,
            f"paths.log_dir={tmp_path}",
            f"paths.cache_dir={tmp_path}/cache",
            *overrides,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (sweep,) = (tmp_path / "toy" / "multiruns").iterdir()
    return sweep


def trial_overrides(trial: Path) -> dict[str, str]:
    overrides = OmegaConf.load(trial / ".hydra" / "overrides.yaml")
    return dict(o.split("=", 1) for o in overrides)


@pytest.mark.slow
def test_optuna_search_runs_trials_in_their_folders_and_writes_the_best_parameters(tmp_path):
    sweep = multirun(tmp_path, ["hparams_search=multi30k_de_en", "hydra.sweeper.n_trials=3"])

    trials = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [t.name for t in trials] == ["0", "1", "2"]
    for trial in trials:
        assert list((trial / "checkpoints").glob("step*-bleu*.ckpt"))
        assert "Optimized metric val/bleu (maximize)" in (trial / "train.log").read_text()
    results = OmegaConf.load(sweep / "optimization_results.yaml")
    searched = OmegaConf.load(ROOT / "conf" / "hparams_search" / "multi30k_de_en.yaml")
    assert results.best_params.keys() == searched.hydra.sweeper.params.keys()
    best = {name: str(value) for name, value in results.best_params.items()}
    assert any(best.items() <= trial_overrides(t).items() for t in trials)


@pytest.mark.slow
# optuna 2.10's storage models use SQLAlchemy 1.4 APIs that 2.0 removed: hence the pin.
@pytest.mark.filterwarnings("ignore:Deprecated API features detected")
def test_a_diverging_trial_is_recorded_as_failed_and_the_search_goes_on(tmp_path):
    import optuna  # imported here, so that its warning is filtered

    storage = f"sqlite:///{tmp_path}/optuna.db"
    sweep = multirun(
        tmp_path,
        [
            "hparams_search=multi30k_de_en",
            "hydra.sweeper.n_trials=3",
            f"hydra.sweeper.storage={storage}",
            # With optuna 2.10.1 this seed samples 1e30 (NaN loss within a step) first.
            "hydra.sweeper.sampler.seed=11",
            "module.lr_factor=choice(1e30,0.2)",
            # Fixed, so that only the learning rate is searched.
            "module.warmup_steps=50",
            "model.dropout=0.1",
            "module.label_smoothing=0.1",
            "model.d_model=64",
            "model.d_ff=128",
            "model.N=1",
        ],
    )

    study = optuna.load_study(study_name="multi30k_de_en", storage=storage)
    states = [t.state for t in study.trials]
    assert len(states) == 3 and optuna.trial.TrialState.FAIL in states
    first_failure = states.index(optuna.trial.TrialState.FAIL)
    assert optuna.trial.TrialState.COMPLETE in states[first_failure + 1 :]
    failed = sweep / str(first_failure) / "train.log"
    assert "training diverged: train/loss=nan" in failed.read_text()
    results = OmegaConf.load(sweep / "optimization_results.yaml")
    assert results.best_params == {"module.lr_factor": 0.2}


@pytest.mark.slow
def test_grid_multirun_runs_every_combination(tmp_path):
    sweep = multirun(tmp_path, ["model.dropout=0.1,0.3", "model.N=1"])

    dropouts = sorted(trial_overrides(t)["model.dropout"] for t in sweep.iterdir() if t.is_dir())
    assert dropouts == ["0.1", "0.3"]


def test_the_optuna_search_composes_with_its_sweeper(tmp_path):
    cfg = compose_train(tmp_path, ["hparams_search=multi30k_de_en"])

    assert cfg.task_name == "multi30k_de_en"
    assert cfg.hydra.sweeper._target_.endswith("OptunaSweeper")
    assert cfg.hydra.sweeper.direction == cfg.optimized_direction == "maximize"
    assert cfg.hydra.sweeper.max_failure_rate == 1.0  # a failed trial does not stop the search


def test_wandb_sweep_file_runs_train_py_with_overrides_of_real_config_keys(tmp_path):
    sweep = yaml.safe_load(WANDB_SWEEP.read_text())
    assert sweep["program"] == "train.py" and "${program}" in sweep["command"]
    assert "${args_no_hyphens}" in sweep["command"]  # key=value: Hydra's override syntax
    assert sweep["metric"] == {"name": "val/bleu", "goal": "maximize"}

    values = {
        name: spec["values"][-1] if "values" in spec else spec["max"]
        for name, spec in sweep["parameters"].items()
    }
    # The arguments the W&B agent substitutes for ${args_no_hyphens}.
    args = create_sweep_command_args({"args": {k: {"value": v} for k, v in values.items()}})
    fixed = [a for a in sweep["command"] if "=" in a and not a.startswith("$")]
    cfg = compose_train(tmp_path, [*fixed, *args["args_no_hyphens"]])
    for name, value in values.items():
        assert OmegaConf.select(cfg, name, throw_on_missing=True) == value


@pytest.mark.parametrize(
    ("mode", "group"), [("RUN", None), ("MULTIRUN", "toy/2026-01-02_03-04-05")]
)
def test_wandb_runs_are_grouped_by_sweep_in_multiruns_only(tmp_path, mode, group):
    cfg = compose_train(
        tmp_path, ["experiment=toy", "hydra.sweep.dir=/sweeps/toy/2026-01-02_03-04-05"]
    )
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.mode = mode
    HydraConfig.instance().set_config(cfg)

    group_wandb_runs_by_sweep(cfg)
    assert cfg.logger.wandb.group == group


def test_an_explicit_wandb_group_wins(tmp_path):
    cfg = compose_train(tmp_path, ["logger.wandb.group=mine"])
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.mode = "MULTIRUN"
    HydraConfig.instance().set_config(cfg)

    group_wandb_runs_by_sweep(cfg)
    assert cfg.logger.wandb.group == "mine"


def test_optimized_metric_is_the_best_value_when_a_checkpoint_kept_it(tmp_path, caplog):
    cfg = compose_train(tmp_path)
    assert optimized_metric(cfg, {"val/bleu": 20.0, "best/val/bleu": 25.0}) == 25.0
    assert optimized_metric(cfg, {"val/bleu": 20.0}) == 20.0
    # A run that ended before its first validation: reported missing, not a crash.
    assert optimized_metric(cfg, {"val/loss": 2.0}) is None
    assert "optimized_metric=val/bleu is missing" in caplog.text
    cfg.optimized_metric = None
    assert optimized_metric(cfg, {"val/bleu": 20.0}) is None


def test_a_non_finite_training_loss_raises():
    raise_if_diverged({"train/loss": 2.0})
    for loss in (float("nan"), float("inf")):
        with pytest.raises(FloatingPointError, match="diverged"):
            raise_if_diverged({"train/loss": loss})
