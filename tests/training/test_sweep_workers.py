"""Workers that share one Optuna study: on a real PostgreSQL server, through the submitit
launcher, and the errors that a bad storage, search space or n_trials gets before any trial."""

import functools
import socket
import subprocess
from pathlib import Path

import optuna
import pytest
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.samplers import TPESampler
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from helpers.ddp import ddp_env
from helpers.hold_until import hold_until
from helpers.hydra_compose import ROOT
from helpers.polling import poll
from helpers.postgres_server import create_database, postgres_server
from helpers.study_workers import (
    SEARCH,
    STUDY,
    TIMEOUT,
    database_name,
    finish,
    on,
    output,
    start_worker,
)
from helpers.sweep_runs import train_command, wait_for
from hydra_plugins.transformer_nmt_sweeper._impl import StudyWorker
from hydra_plugins.transformer_nmt_sweeper._space import (
    SearchSpaceChanged,
    keep_search_space,
    search_space,
)
from hydra_plugins.transformer_nmt_sweeper._storage import StorageUnreachable, open_storage
from hydra_plugins.transformer_nmt_sweeper._trials import STOPS, SURPLUS

COMPLETE, FAIL, RUNNING = TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING


@pytest.fixture(scope="module")
def postgres():
    with postgres_server() as socket_folder:
        yield socket_folder


@pytest.fixture
def database(postgres, request) -> str:
    """A new database on the server: its URL."""
    return create_database(postgres, database_name(request))


def trial_folders(sweep: Path) -> list[int]:
    return sorted(int(p.name) for p in sweep.iterdir() if p.name.isdigit())


def assert_only_surplus_besides(study: optuna.Study, trials: list[FrozenTrial]) -> None:
    """Every other trial of the study was withdrawn, two workers having asked for the last one."""
    numbers = {t.number for t in trials}
    for trial in study.trials:
        if trial.number not in numbers:
            assert trial.state == FAIL and trial.user_attrs[SURPLUS], trial


def lr_factor(folder: Path) -> float:
    overrides = OmegaConf.load(folder / ".hydra" / "overrides.yaml")
    return float(next(o for o in overrides if o.startswith("module.lr_factor=")).split("=")[1])


@pytest.mark.slow
def test_two_workers_run_n_trials_together_each_trial_in_its_own_folder(tmp_path, database):
    workers = {name: start_worker(tmp_path, name, on(database, 6)) for name in ("a", "b")}
    for name, worker in workers.items():
        finish(tmp_path, name, worker)

    study = optuna.load_study(study_name=STUDY, storage=database)
    trials = study.get_trials(states=(COMPLETE,))
    assert len(trials) == 6  # 6 in all, not 6 each
    assert_only_surplus_besides(study, trials)
    sweep = tmp_path / "toy" / "sweeps" / STUDY
    assert trial_folders(sweep) == [t.number for t in trials]
    for trial in trials:
        folder = sweep / str(trial.number)
        assert (folder / "train.log").read_text().count("Optimized metric val/loss") == 1
        assert lr_factor(folder) == trial.params["module.lr_factor"]  # ran what it was asked
    values = [t.value for t in trials]
    assert len(set(values)) > 1
    results = OmegaConf.load(sweep / "optimization_results.yaml")
    best = min(trials, key=lambda t: t.value)
    assert results.best_value == min(values)
    assert results.best_params == best.params


@pytest.mark.slow
def test_a_killed_worker_s_trial_is_resumed_first_and_the_study_ends_with_n_trials(
    tmp_path, database
):
    sweep = tmp_path / "toy" / "sweeps" / STUDY
    release = tmp_path / "release"
    held = [*on(database, 3), *hold_until(release)]  # every trial holds until released
    started = sweep / "*" / "started"
    first = start_worker(tmp_path, "first", held)
    wait_for(started, 1)  # trial 0, the first worker's
    second = start_worker(tmp_path, "second", held)
    wait_for(started, 2)  # trial 1, the second worker's
    first.kill()
    first.wait(timeout=TIMEOUT)
    restarted = start_worker(tmp_path, "restarted", held)
    # Trial 0 again, in its folder, before any new trial: the restarted worker took it back.
    trial_0 = lambda: (sweep / "0" / "started").read_text() == str(restarted.pid)  # noqa: E731
    poll(trial_0, TIMEOUT, lambda: output(tmp_path, "restarted"))

    study = optuna.load_study(study_name=STUDY, storage=database)
    assert [t.state for t in study.trials] == [RUNNING, RUNNING]
    assert study.trials[0].user_attrs[STOPS] == [
        f"its worker process {first.pid} on {socket.gethostname()} is dead (its process gone "
        "from this boot and PID namespace)"
    ]
    release.touch()
    finish(tmp_path, "second", second)
    finish(tmp_path, "restarted", restarted)

    complete = study.get_trials(states=(COMPLETE,))
    assert [t.number for t in complete] == [0, 1, 2]  # the study's n_trials, 0 resumed
    assert_only_surplus_besides(study, complete)
    assert trial_folders(sweep) == [0, 1, 2]
    assert (sweep / "0" / "train.log").read_text().count("Optimized metric") == 1


@pytest.mark.slow
def test_the_submitit_local_launcher_runs_a_worker_s_trials_at_the_same_time(tmp_path):
    sweep = tmp_path / "toy" / "sweeps" / STUDY
    # Each trial holds until both have started: they end only if they run side by side.
    both = hold_until(sweep / "*" / "started", count=2)
    launcher = ["hydra/launcher=submitit_local", "hydra.sweeper.n_jobs=2"]
    overrides = ["hydra.sweeper.n_trials=2", *launcher, *both]
    finish(tmp_path, "w", start_worker(tmp_path, "w", overrides))

    storage = JournalStorage(JournalFileBackend(str(sweep / "optuna.journal")))
    trials = optuna.load_study(study_name=STUDY, storage=storage).trials
    assert [t.state for t in trials] == [COMPLETE, COMPLETE]
    assert trial_folders(sweep) == [0, 1]


@pytest.mark.slow
def test_an_unreachable_database_is_named_before_any_trial_runs(tmp_path):
    url = "postgresql://postgres@127.0.0.1:9/optuna"  # nothing listens on port 9
    run = subprocess.run(
        train_command(tmp_path, [*SEARCH, f"hydra.sweeper.storage='{url}'"]),
        cwd=ROOT,
        env=ddp_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert run.returncode != 0
    assert f"hydra.sweeper.storage={url} cannot be reached" in run.stderr
    assert "pg_ctl" in run.stderr  # how to start a server
    assert not list(tmp_path.glob("toy/sweeps/*/0"))


SPACE = {"module.lr_factor": FloatDistribution(0.25, 2.0, log=True)}


def worker(storage: Path, n_trials: int, params: dict[str, str]) -> StudyWorker:
    """A sweeper's worker with no launcher: for studies that need no more trials."""
    study_worker = StudyWorker(
        sampler=functools.partial(TPESampler, seed=0),
        direction="maximize",
        storage=str(storage),
        study_name=STUDY,
        n_trials=n_trials,
        n_jobs=1,
        max_failure_rate=1.0,
        params=params,
    )
    study_worker.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(storage.parent)}}})
    return study_worker


def stored_study(path: Path, complete: int) -> optuna.Study:
    """A study over SPACE in the journal at `path`, with `complete` trials done."""
    study = optuna.create_study(
        study_name=STUDY,
        storage=JournalStorage(JournalFileBackend(str(path))),
        direction="maximize",
    )
    keep_search_space(study, SPACE)
    for value in range(complete):
        study.tell(study.ask(SPACE), value)
    return study


def test_a_study_name_reused_with_another_search_space_is_refused(tmp_path):
    study = stored_study(tmp_path / "optuna.journal", complete=1)
    other = {"module.lr_factor": "interval(0.1,1.0)", "model.dropout": "interval(0.0,0.3)"}

    with pytest.raises(SearchSpaceChanged, match=f"study {STUDY} was searched") as refused:
        worker(tmp_path / "optuna.journal", 5, other).sweep([])
    assert "model.dropout: stored (not searched)" in str(refused.value)
    assert "module.lr_factor: stored" in str(refused.value)
    assert "hydra.sweeper.study_name" in str(refused.value)  # what to do
    assert len(study.trials) == 1  # nothing asked

    # Fixing a searched parameter on the command line makes another space too.
    same = {"module.lr_factor": "tag(log, interval(0.25, 2.0))"}
    with pytest.raises(SearchSpaceChanged):
        worker(tmp_path / "optuna.journal", 1, same).sweep(["module.lr_factor=0.5"])
    # The same space goes on: here it has all its trials, and writes its results.
    worker(tmp_path / "optuna.journal", 1, same).sweep([])
    assert OmegaConf.load(tmp_path / "optimization_results.yaml").best_value == 0


def test_n_trials_below_the_trials_already_finished_is_refused(tmp_path):
    study = stored_study(tmp_path / "optuna.journal", complete=3)
    params = {"module.lr_factor": "tag(log, interval(0.25, 2.0))"}

    with pytest.raises(ValueError, match="n_trials=2 is below the 3 trials"):
        worker(tmp_path / "optuna.journal", 2, params).sweep([])
    assert len(study.trials) == 3


def test_an_unreachable_database_s_error_hides_its_password():
    with pytest.raises(StorageUnreachable) as refused:
        open_storage("postgresql://me:secret@127.0.0.1:9/optuna")
    assert "postgresql://me:***@127.0.0.1:9/optuna cannot be reached" in str(refused.value)
    assert "secret" not in str(refused.value)


def test_a_later_override_of_a_parameter_wins_searched_or_fixed():
    assert search_space(["x=choice(1,2)", "x=3"]) == ({}, {"x": "3"})
    space, fixed = search_space(["x=3", "x=choice(1,2)"])
    assert (space, fixed) == ({"x": CategoricalDistribution([1, 2])}, {})
