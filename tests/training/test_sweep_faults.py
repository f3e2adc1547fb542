"""A shared study that survives hosts and database blips: workers as two hosts (own hostname and
PID namespace) on one journal file or one PostgreSQL study, one SIGKILLed mid-trial; a real
PostgreSQL server restarted mid-trial, and stopped for good."""

import itertools
import threading
import time
from datetime import datetime

import optuna
import pytest
import sqlalchemy
from omegaconf import OmegaConf
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from helpers.hold_until import hold_until
from helpers.polling import poll
from helpers.postgres_server import create_database, pg_ctl, postgres_server
from helpers.study_workers import (
    STUDY,
    TIMEOUT,
    can_run_as_another_host,
    database_name,
    finish,
    on,
    output,
    start_worker,
)
from helpers.sweep_runs import dead_worker, wait_for
from hydra_plugins.transformer_nmt_sweeper import _heartbeat
from hydra_plugins.transformer_nmt_sweeper._heartbeat import HEARTBEAT, Beating, beat
from hydra_plugins.transformer_nmt_sweeper._storage import StorageLost, retrying, shown
from hydra_plugins.transformer_nmt_sweeper._trials import (
    INTERRUPTED,
    WORKER,
    fail_dead_trials,
    waiting_on,
)
from transformer_nmt.runtime.processes import filesystem_now

COMPLETE, FAIL, RUNNING = TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING
INTERVAL, HEARTBEAT_TIMEOUT, STORAGE_TIMEOUT = 1, 5, 4  # seconds, short for tests
BEATING = [
    f"hydra.sweeper.heartbeat_interval={INTERVAL}",
    f"hydra.sweeper.heartbeat_timeout={HEARTBEAT_TIMEOUT}",
]
SHORT_OUTAGE = f"hydra.sweeper.storage_timeout={STORAGE_TIMEOUT}"
# Longer than a restart of a server on a loaded machine: the outage is ridden out.
LONG_OUTAGE = f"hydra.sweeper.storage_timeout={TIMEOUT}"


@pytest.fixture(scope="module")
def postgres():
    with postgres_server() as socket_folder:
        yield socket_folder


def study_of(storage: str) -> optuna.Study:
    if "://" not in storage:
        storage = JournalStorage(JournalFileBackend(storage))
    return optuna.load_study(study_name=STUDY, storage=storage)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["journal", "postgresql"])
def test_a_worker_killed_on_another_host_is_failed_only_after_its_heartbeat_timeout(
    tmp_path, kind, request
):
    if (why := can_run_as_another_host()) is not None:
        pytest.skip(why)
    sweep = tmp_path / "toy" / "sweeps" / STUDY
    if kind == "journal":
        storage = str(sweep / "optuna.journal")
    else:
        storage = create_database(request.getfixturevalue("postgres"), database_name(request))
    settings = [*on(storage, 2), *BEATING]
    # Host a's trial holds until it is killed; host b runs the other trial, then waits for a's.
    a = start_worker(tmp_path, "a", [*settings, *hold_until(tmp_path / "never")], host="host-a")
    wait_for(sweep / "0" / "started")
    b = start_worker(tmp_path, "b", settings, host="host-b")
    poll(lambda: "waiting for trial 0 on process" in output(tmp_path, "b"), TIMEOUT, lambda: "b")
    # b looks every interval, for longer than the timeout, while a lives.
    waiting_since, overdue = filesystem_now(tmp_path), HEARTBEAT_TIMEOUT + 2 * INTERVAL
    poll(lambda: filesystem_now(tmp_path) - waiting_since > overdue, 60, str)
    assert [t.state for t in study_of(storage).trials] == [RUNNING, COMPLETE]

    a.kill()
    killed_at = datetime.now()
    a.wait(timeout=TIMEOUT)
    finish(tmp_path, "b", b)

    trials = study_of(storage).trials
    assert [t.state for t in trials] == [FAIL, COMPLETE, COMPLETE]  # n_trials=2 COMPLETE
    assert trials[0].user_attrs[INTERRUPTED]
    # Failed a heartbeat timeout after its last beat, which came at most an interval before.
    assert (trials[0].datetime_complete - killed_at).total_seconds() > HEARTBEAT_TIMEOUT - INTERVAL
    assert "Trial 0: its worker process 1 on host-a is dead (no heartbeat for" in output(
        tmp_path, "b"
    )
    results = OmegaConf.load(sweep / "optimization_results.yaml")
    assert results.best_value == min(t.value for t in trials[1:])
    assert (sweep / "trials.csv").read_text().count("\n") == 4  # a header and 3 trials


def last_heartbeat(database: str) -> datetime | None:
    engine = sqlalchemy.create_engine(database, poolclass=sqlalchemy.pool.NullPool)
    with engine.connect() as db:
        return db.execute(sqlalchemy.text("SELECT max(heartbeat) FROM trial_heartbeats")).scalar()


def server_now(database: str) -> datetime:
    engine = sqlalchemy.create_engine(database, poolclass=sqlalchemy.pool.NullPool)
    with engine.connect() as db:
        return db.execute(sqlalchemy.text("SELECT localtimestamp")).scalar()


@pytest.mark.slow
def test_a_database_restarted_mid_trial_keeps_the_live_trial_and_stores_its_value(
    tmp_path, postgres, request
):
    database = create_database(postgres, database_name(request))
    sweep = tmp_path / "toy" / "sweeps" / STUDY
    release = tmp_path / "release"
    held = [*on(database, 1), *BEATING, LONG_OUTAGE, *hold_until(release)]
    worker = start_worker(tmp_path, "w", held)
    wait_for(sweep / "0" / "started")

    pg_ctl(postgres, "restart")  # every session cut
    restarted = server_now(database)
    beat = lambda: (last_heartbeat(database) or restarted) > restarted  # noqa: E731
    poll(beat, 60, lambda: "no heartbeat since the restart")
    assert [t.state for t in study_of(database).trials] == [RUNNING]
    release.touch()
    finish(tmp_path, "w", worker)

    (trial,) = study_of(database).trials
    assert trial.state == COMPLETE and trial.value is not None
    assert OmegaConf.load(sweep / "optimization_results.yaml").best_value == trial.value


@pytest.mark.slow
def test_a_worker_whose_database_stopped_for_good_stops_naming_it(tmp_path, request):
    sweep = tmp_path / "toy" / "sweeps" / STUDY
    release = tmp_path / "release"
    with postgres_server() as server:
        database = create_database(server, database_name(request))
        held = [*on(database, 1), *BEATING, SHORT_OUTAGE, *hold_until(release)]
        worker = start_worker(tmp_path, "w", held)
        wait_for(sweep / "0" / "started")
        stopping = time.monotonic()
        pg_ctl(server, "stop")
        lost = f"hydra.sweeper.storage={shown(database)} could not be reached for more than"
        poll(lambda: lost in output(tmp_path, "w"), TIMEOUT, lambda: output(tmp_path, "w"))
        # Its last beat came at most an interval before the stop began.
        assert time.monotonic() - stopping > STORAGE_TIMEOUT - INTERVAL
        release.touch()
        assert worker.wait(timeout=TIMEOUT) != 0
    assert f"hydra.sweeper.storage_timeout={STORAGE_TIMEOUT} s" in output(tmp_path, "w")
    assert not (sweep / "optimization_results.yaml").exists()


def test_a_journal_trial_is_judged_by_its_heartbeat_on_the_filesystem_s_clock(
    tmp_path, monkeypatch
):
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "optuna.journal")))
    study = optuna.create_study(storage=storage)
    elsewhere = {**dead_worker(), "namespace": "another-boot/1"}  # nothing proves it dead
    beating, silent, unbeaten = (study.ask() for _ in range(3))
    for trial in (beating, silent, unbeaten):
        trial.set_user_attr(WORKER, elsewhere)
    for trial in (beating, silent):
        beat(storage, trial._trial_id)
    then = filesystem_now(tmp_path) - HEARTBEAT_TIMEOUT - 1
    storage.set_trial_system_attr(silent._trial_id, HEARTBEAT, then)
    monkeypatch.setattr(time, "time", lambda: time.monotonic() + 10_000)  # this host runs ahead

    assert fail_dead_trials(study, storage, HEARTBEAT_TIMEOUT) == [silent.number]
    assert [t.state for t in study.trials] == [RUNNING, FAIL, RUNNING]
    assert study.trials[silent.number].user_attrs[INTERRUPTED]
    waiting = waiting_on(study, storage)
    assert waiting[unbeaten.number] == f"process {elsewhere['pid']} on {elsewhere['host']}"
    assert waiting[beating.number].startswith(f"{waiting[unbeaten.number]}, last heartbeat ")


def test_a_storage_call_is_tried_again_until_it_succeeds_or_the_timeout_names_it(monkeypatch):
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    down = sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("connection refused"))
    calls = []

    def flaky():
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise down
        return "stored"

    assert retrying(flaky, "postgresql://me:secret@db/optuna", timeout=60) == "stored"
    with pytest.raises(StorageLost) as lost:
        retrying(lambda: (_ for _ in ()).throw(down), "postgresql://me:secret@db/optuna", 0)
    assert str(lost.value).startswith(
        "hydra.sweeper.storage=postgresql://me:***@db/optuna could not be reached for more than "
        "hydra.sweeper.storage_timeout=0 s (connection refused): this worker stops."
    )


def test_a_heartbeat_rides_out_failures_and_gives_up_once_past_the_timeout(tmp_path, monkeypatch):
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "optuna.journal")))
    trial = optuna.create_study(storage=storage).ask()
    failures, beaten = iter(range(3)), threading.Event()

    def flaky_beat(storage, trial_id):  # fails three times, then beats
        if next(failures, None) is not None:
            raise OSError(5, "Input/output error")
        beaten.set()

    monkeypatch.setattr(_heartbeat, "beat", flaky_beat)
    stops = []
    with Beating(storage, [trial], 0.01, "optuna.journal", 60, stop=lambda: stops.append(1)) as b:
        assert beaten.wait(60)
    assert stops == [] and b.lost is None

    failures = itertools.count()  # fails for good
    with Beating(storage, [trial], 0.01, "optuna.journal", 0, stop=lambda: stops.append(1)) as b:
        poll(lambda: stops, 60, lambda: "no stop")
    assert stops == [1]
    assert b.lost.startswith("hydra.sweeper.storage=optuna.journal could not be reached")
