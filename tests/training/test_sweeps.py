"""Sweeps: Optuna and grid multiruns of `train.py`, resumed searches, the W&B sweep file, and
failed trials."""

import itertools
import signal
import subprocess
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf, open_dict, read_write
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.storages import JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState
from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

from helpers import wandb_records
from helpers.hydra_compose import ROOT, compose_train
from helpers.polling import poll
from helpers.signal_at_step import signal_at
from helpers.study_workers import STUDY, TIMEOUT, finish, on, output, start_worker
from helpers.sweep_runs import TOY_SPACE, dead_worker, train_command
from hydra_plugins.transformer_nmt_sweeper._heartbeat import Silences
from hydra_plugins.transformer_nmt_sweeper._space import search_space
from hydra_plugins.transformer_nmt_sweeper._storage import Contacts
from hydra_plugins.transformer_nmt_sweeper._trials import (
    STOPS,
    SURPLUS,
    WORKER,
    claim_trials,
    counted_trials,
    finished_trials,
    keep_if_counted,
    resume_dead_trials,
    this_worker,
)
from transformer_nmt.model.transformer.config import settings_problems
from transformer_nmt.train import build_loggers
from transformer_nmt.training.plan.run_plan import plan_run
from transformer_nmt.training.run.loggers import finish_wandb_runs, wandb_group
from transformer_nmt.training.run.sweeps import optimized_metric, raise_if_diverged

WANDB_SWEEP = ROOT / "experiments" / "sweeps" / "wandb_multi30k_de_en.yaml"
# Every parameter still searched, among toy sizes: the space's own sizes double the test's time.
TOY_SIZES = [
    "data.vocab_size=choice(384,512)",
    "data.max_tokens=choice(512,1024)",
    "model.N=choice(1,2)",
    "model.d_model=choice(32,64)",
    "model.d_ff=choice(64,128)",
]


def multirun(tmp_path: Path, overrides: list[str]) -> Path:
    """Runs `python train.py -m` as a user does; returns the sweep folder."""
    run = subprocess.run(
        train_command(tmp_path, overrides),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    # toy/multiruns/<date_time> for a grid, toy/sweeps/<study name> for an Optuna search.
    (sweep,) = {p.parents[1] for p in tmp_path.glob("toy/*/*/*/.hydra")}
    return sweep


def trial_overrides(trial: Path) -> dict[str, str]:
    overrides = OmegaConf.load(trial / ".hydra" / "overrides.yaml")
    return dict(o.split("=", 1) for o in overrides)


@pytest.mark.slow
def test_optuna_search_runs_trials_in_their_folders_and_writes_the_best_parameters(tmp_path):
    sweep = multirun(
        tmp_path, ["hparams_search=multi30k_de_en", "hydra.sweeper.n_trials=3", *TOY_SIZES]
    )

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
def test_a_diverging_trial_is_recorded_as_failed_and_the_search_goes_on(tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    sweep = multirun(
        tmp_path,
        [
            "hparams_search=multi30k_de_en",
            "hydra.sweeper.n_trials=3",
            f"hydra.sweeper.storage={storage}",
            # Trial k samples with seed + k: this seed samples 1e30 (NaN loss within a step) first.
            "hydra.sweeper.sampler.seed=11",
            "module.lr_factor=choice(1e30,0.2)",
            *TOY_SPACE,  # only the learning rate is searched
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


@pytest.mark.slow
def test_a_trial_stopped_by_sigterm_is_resumed_first_in_its_folder_by_the_same_command(tmp_path):
    sweep = tmp_path / "toy" / "sweeps" / STUDY
    # SIGTERM as trial 0's step 1 starts: it stops after update 2 of 3, before validating.
    stop = signal_at(1, signal.SIGTERM, once=str(tmp_path / "signalled"))
    stopped = start_worker(tmp_path, "stopped", [*on(str(sweep / "optuna.journal"), 2), *stop])
    assert stopped.wait(timeout=TIMEOUT) == 143, output(tmp_path, "stopped")[-3000:]

    storage = JournalStorage(JournalFileBackend(str(sweep / "optuna.journal")))
    (waiting,) = optuna.load_study(study_name=STUDY, storage=storage).trials
    assert waiting.state == TrialState.WAITING
    assert waiting.user_attrs[STOPS] == ["stopped (exit status 143)"]
    assert checkpoint_step(sweep / "0" / "checkpoints" / "last.ckpt") == 2

    again = start_worker(tmp_path, "again", [*on(str(sweep / "optuna.journal"), 2), *stop])
    finish(tmp_path, "again", again)

    trials = optuna.load_study(study_name=STUDY, storage=storage).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert all(t.value is not None for t in trials)
    assert (
        trials[0].params == waiting.params
        and trials[0].user_attrs[STOPS] == waiting.user_attrs[STOPS]
    )
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0", "1"]
    log = (sweep / "0" / "train.log").read_text()
    assert "SIGTERM at step 2: saved" in log
    assert f"Resuming from {sweep / '0' / 'checkpoints' / 'last.ckpt'}" in log
    assert log.count("Optimized metric val/loss") == 1
    assert checkpoint_step(sweep / "0" / "checkpoints" / "last.ckpt") == 3  # on from step 2
    for trial in trials:  # each ran its own parameters, with the config's seed
        folder = sweep / str(trial.number)
        assert (
            float(trial_overrides(folder)["module.lr_factor"]) == trial.params["module.lr_factor"]
        )
        assert OmegaConf.load(folder / ".hydra" / "config.yaml").seed == 1234
    assert "Trial 0 resumes in its folder" in output(tmp_path, "again")


def checkpoint_step(path: Path) -> int:
    return torch.load(path, map_location="cpu", weights_only=True)["global_step"]


def test_a_dead_worker_s_trial_waits_to_be_resumed_first_and_still_counts():
    study = optuna.create_study()
    complete, failed, running = (study.ask({"x": FloatDistribution(0, 1)}) for _ in range(3))
    study.tell(complete, 1.0)
    study.tell(failed, state=TrialState.FAIL)
    dead = dead_worker()
    running.set_user_attr(WORKER, dead)

    assert resume_dead_trials(study, study._storage) == [running.number]
    waiting = study.trials[running.number]
    assert waiting.state == TrialState.WAITING
    assert waiting.user_attrs[STOPS] == [
        f"its worker process {dead['pid']} on {dead['host']} is dead (its process gone from "
        "this boot and PID namespace)"
    ]
    assert [t.number for t in finished_trials(study)] == [complete.number, failed.number]
    assert len(counted_trials(study)) == 3
    assert resume_dead_trials(study, study._storage) == []  # nothing is left running
    space = {"x": FloatDistribution(0, 1)}
    (resumed,) = claim_trials(study, n_trials=3, batch=1, space=space)  # before any new one
    assert (resumed.number, resumed.params) == (running.number, waiting.params)


@pytest.mark.filterwarnings(
    "ignore::optuna.exceptions.ExperimentalWarning", "ignore:Heartbeat of storage:UserWarning"
)
def test_only_trials_whose_worker_is_provably_dead_are_resumed(tmp_path):
    storage = RDBStorage(f"sqlite:///{tmp_path}/optuna.db", heartbeat_interval=1)
    study = optuna.create_study(storage=storage)
    gone, alive, elsewhere, silent, unowned = (study.ask() for _ in range(5))
    gone.set_user_attr(WORKER, dead_worker())
    alive.set_user_attr(WORKER, this_worker())
    # Another boot or PID namespace, under this hostname too: its pid proves nothing.
    elsewhere.set_user_attr(WORKER, {**dead_worker(), "namespace": "another-boot/1"})
    silent.set_user_attr(WORKER, {**dead_worker(), "namespace": "another-boot/1"})
    for trial in (elsewhere, silent):
        storage.record_heartbeat(trial._trial_id)
    # SQLite stamps beats to the second: a timeout of a few seconds tells a beat from none.
    silences = Silences(Contacts(), timeout=3)

    assert resume_dead_trials(study, storage, silences) == [gone.number]  # silent: seen just now

    def judged() -> list[int]:
        storage.record_heartbeat(elsewhere._trial_id)  # beats on, as its live worker does
        return resume_dead_trials(study, storage, silences)

    assert poll(judged, 60, lambda: "silent is never judged dead") == [silent.number]
    for trial in (gone, silent):
        assert study.trials[trial.number].state == TrialState.WAITING
    for trial in (alive, elsewhere, unowned):
        assert study.trials[trial.number].state == TrialState.RUNNING


@pytest.mark.parametrize("order", [("early", "late"), ("late", "early")])
def test_of_two_workers_asking_for_the_last_trial_at_once_only_the_later_one_withdraws(order):
    study = optuna.create_study()
    study.tell(study.ask(), 1.0)  # n_trials=2: one left
    asked = {"early": study.ask(), "late": study.ask()}  # both asked before either checked

    kept = {name: keep_if_counted(study, asked[name], n_trials=2) for name in order}
    assert kept == {"early": True, "late": False}
    assert study.trials[asked["late"].number].user_attrs[SURPLUS]
    states = [TrialState.COMPLETE, TrialState.RUNNING, TrialState.FAIL]
    assert [t.state for t in study.trials] == states
    assert len(counted_trials(study)) == 2


def test_an_enqueued_trial_runs_first_under_its_own_number():
    study = optuna.create_study()
    study.tell(study.ask(), 1.0)
    study.enqueue_trial({"x": 0.5})  # trial 1, waiting: asked next
    study.enqueue_trial({"x": 0.7})

    (trial,) = claim_trials(study, n_trials=5, batch=1, space={"x": FloatDistribution(0, 1)})
    assert trial.number == 1
    assert trial.params == {"x": 0.5}


@pytest.mark.parametrize(
    ("search", "src_lang", "tgt_lang"),
    [("multi30k_de_en", "de", "en"), ("multi30k_en_de", "en", "de")],
)
def test_the_optuna_searches_compose_with_a_study_stored_in_a_dateless_sweep_folder(
    tmp_path, search, src_lang, tgt_lang
):
    cfg = compose_train(tmp_path, [f"hparams_search={search}"])

    assert cfg.task_name == cfg.hydra.sweeper.study_name == search
    assert (cfg.data.src_lang, cfg.data.tgt_lang) == (src_lang, tgt_lang)
    assert cfg.hydra.sweeper._target_.endswith(
        "transformer_nmt_sweeper.optuna_sweeper.OptunaSweeper"
    )
    # Null: the sweeper takes val/bleu's own (`study_direction`).
    assert cfg.hydra.sweeper.direction is cfg.optimized_direction is None
    assert cfg.optimized_metric == "val/bleu"
    assert cfg.hydra.sweeper.max_failure_rate == 1.0  # a failed trial does not stop the search
    # The same command finds the same study: no date or time in its path.
    sweep_dir = tmp_path / "outputs" / search / "sweeps" / search
    assert cfg.hydra.sweep.dir == str(sweep_dir)
    assert cfg.hydra.sweeper.storage == f"{sweep_dir}/optuna.journal"
    assert cfg.trainer.max_time == "00:00:10:00"  # the budget of a trial


def test_the_twin_searches_search_the_same_space(tmp_path):
    de_en, en_de = (
        compose_train(tmp_path, [f"hparams_search={s}"]).hydra.sweeper.params
        for s in ("multi30k_de_en", "multi30k_en_de")
    )
    assert de_en == en_de


def test_every_model_in_the_search_space_is_valid(tmp_path):
    cfg = compose_train(tmp_path, ["hparams_search=multi30k_de_en"])
    params = [f"{key}={value}" for key, value in cfg.hydra.sweeper.params.items()]
    space, fixed = search_space(params)
    assert not fixed
    for key in space:
        assert OmegaConf.select(cfg, key) is not None, f"{key} is not a config key"
    # Every combination of the model's choices (288): only those can break a model together.
    choices = {
        key.removeprefix("model."): d.choices
        for key, d in space.items()
        if key.startswith("model.") and isinstance(d, CategoricalDistribution)
    }
    assert {"N", "d_model", "d_ff", "h", "tie_embeddings"} <= choices.keys()
    model = OmegaConf.to_container(cfg.model)
    for combination in itertools.product(*choices.values()):
        settings = {**model, **dict(zip(choices, combination, strict=True))}
        assert settings_problems(settings) == [], settings


def test_the_hour_search_searches_width_dropout_and_lr_and_holds_the_recipe(tmp_path):
    cfg = compose_train(tmp_path, ["hparams_search=multi30k_de_en_hour"])
    recipe = compose_train(tmp_path, ["experiment=multi30k_de_en"])

    params = [f"{key}={value}" for key, value in cfg.hydra.sweeper.params.items()]
    space, fixed = search_space(params)
    assert space.keys() == {"model.d_model", "model.dropout", "module.lr_factor"}
    # Every parameter of the first search is either searched or held at the recipe's value.
    first = compose_train(tmp_path, ["hparams_search=multi30k_de_en"]).hydra.sweeper.params
    assert space.keys() | fixed.keys() == first.keys()
    for key, value in fixed.items():
        assert str(OmegaConf.select(recipe, key)) == value, key  # overrides hold strings
    assert cfg.trainer.max_time == recipe.trainer.max_time == "00:01:00:00"  # a trial is the hour
    assert cfg.hydra.sweeper.study_name == "multi30k_de_en_hour"
    assert cfg.hydra.sweep.dir.endswith("multi30k_de_en/sweeps/multi30k_de_en_hour")
    model = OmegaConf.to_container(recipe.model)  # the held values, as just checked
    for d_model in space["model.d_model"].choices:
        assert settings_problems({**model, "d_model": d_model}) == [], d_model


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
def test_wandb_runs_are_grouped_by_sweep_in_multiruns_only(tmp_path, monkeypatch, mode, group):
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = compose_train(
        tmp_path, ["experiment=toy", "hydra.sweep.dir=/sweeps/toy/2026-01-02_03-04-05"]
    )
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.mode = mode
    HydraConfig.instance().set_config(cfg)

    assert wandb_group(cfg) == group
    loggers = build_loggers(cfg, plan_run(cfg))
    finish_wandb_runs(loggers, checkpoint=None)
    (records,) = (tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb")
    assert wandb_records.run_record(records).run_group == (group or "")
    assert cfg.logger.wandb.group is None  # the config is read, never written


def test_an_explicit_wandb_group_wins(tmp_path):
    cfg = compose_train(tmp_path, ["logger.wandb.group=mine"])
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.mode = "MULTIRUN"
    HydraConfig.instance().set_config(cfg)

    assert wandb_group(cfg) == "mine"


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
