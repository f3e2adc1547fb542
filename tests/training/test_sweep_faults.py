"""A shared study that survives hosts and storage outages: workers as two hosts (own hostname and
PID namespace) on one journal file or one PostgreSQL study, one SIGKILLed mid-trial; a journal
out of reach for longer than the heartbeat timeout; a real PostgreSQL server restarted
mid-trial, and stopped for good."""

import functools
import itertools
import os
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
from hydra_plugins.transformer_nmt_sweeper._heartbeat import Beating, Silences, beat
from hydra_plugins.transformer_nmt_sweeper._storage import Contacts, StorageLost, retrying, shown
from hydra_plugins.transformer_nmt_sweeper._trials import (
    STOPS,
    WORKER,
    owned_by_this_worker,
    put_back,
    resume_dead_trials,
    this_worker,
    waiting_on,
)
from transformer_nmt.runtime.lock_file import STALE
from transformer_nmt.runtime.processes import filesystem_now
from transformer_nmt.training.run.run_lock import LOCK_NAME

COMPLETE, RUNNING, WAITING = TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING
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
def test_a_worker_killed_on_another_host_is_resumed_only_after_its_heartbeat_timeout(
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
    # Host a's trial holds until it is killed; host b runs the other trial, then waits for a's,
    # which it runs itself (without the hold) once it has put it back.
    a = start_worker(tmp_path, "a", [*settings, *hold_until(tmp_path / "never")], host="host-a")
    wait_for(sweep / "0" / "started")
    b = start_worker(tmp_path, "b", settings, host="host-b")
    poll(lambda: "waiting for trial 0 on process" in output(tmp_path, "b"), TIMEOUT, lambda: "b")
    # b looks every interval, for longer than the timeout, while a lives.
    waiting_since, overdue = filesystem_now(tmp_path), HEARTBEAT_TIMEOUT + 2 * INTERVAL
    poll(lambda: filesystem_now(tmp_path) - waiting_since > overdue, 60, str)
    assert [t.state for t in study_of(storage).trials] == [RUNNING, COMPLETE]
    params = study_of(storage).trials[0].params

    a.kill()
    killed_at = datetime.now()
    a.wait(timeout=TIMEOUT)
    # The lock a's run left in trial 0's folder, as a crashed host's is once stale: b takes it
    # over then, rather than after waiting lock_file.STALE here.
    stale = filesystem_now(tmp_path) - STALE - 1
    os.utime(sweep / "0" / LOCK_NAME, (stale, stale))
    finish(tmp_path, "b", b)

    trials = study_of(storage).trials
    assert [t.state for t in trials] == [COMPLETE, COMPLETE]  # n_trials=2, trial 0 resumed
    assert trials[0].params == params
    (stop,) = trials[0].user_attrs[STOPS]
    assert stop.startswith("its worker process 1 on host-a is dead (no heartbeat for")
    # Put back a heartbeat timeout after its last beat, which came at most an interval before.
    assert (trials[0].datetime_start - killed_at).total_seconds() > HEARTBEAT_TIMEOUT - INTERVAL
    assert "Trial 0 resumes in its folder" in output(tmp_path, "b")
    results = OmegaConf.load(sweep / "optimization_results.yaml")
    assert results.best_value == min(t.value for t in trials)
    assert (sweep / "trials.csv").read_text().count("\n") == 3  # a header and 2 trials


# b's look at a's last beat, while a is cut off but b is not: b has looked more than once.
BEFORE_B_IS_CUT_OFF = 4 * INTERVAL
# Above BEFORE_B_IS_CUT_OFF with room for a loaded machine: until b is cut off, b times a's
# silence as it should, and must not find it overdue.
OUTAGE_TIMEOUT = 12


def outage_settings(storage: str) -> list[str]:
    return [
        *on(storage, 2),
        f"hydra.sweeper.heartbeat_interval={INTERVAL}",
        f"hydra.sweeper.heartbeat_timeout={OUTAGE_TIMEOUT}",
        LONG_OUTAGE,
    ]


def ride_out_an_outage(tmp_path, a, b, cut: dict, mend: dict) -> None:
    """Cuts worker a off the storage, then b, for longer than the heartbeat timeout; mends b's
    reach first, and a's once b has judged a's trial again; then lets a's trial end.

    b has seen a's last beat before the outage: a judge that counted the outage as silence would
    take a's trial for dead at its first look after it.
    """
    cut["a"]()
    poll(lambda: "Heartbeat to" in output(tmp_path, "a"), TIMEOUT, lambda: output(tmp_path, "a"))
    a_cut_off = time.monotonic()
    poll(lambda: time.monotonic() - a_cut_off > BEFORE_B_IS_CUT_OFF, 60, str)
    cut["b"]()
    b_cut_off = time.monotonic()
    poll(lambda: "failed (" in output(tmp_path, "b"), TIMEOUT, lambda: output(tmp_path, "b"))
    poll(lambda: time.monotonic() - b_cut_off > OUTAGE_TIMEOUT + 2 * INTERVAL, 60, str)
    mend["b"]()
    # b judges trial 0 again, its silence timed from its own return to the storage.
    again = "Storage reached again: the heartbeats of running trials 0 are timed from now"
    poll(lambda: again in output(tmp_path, "b"), TIMEOUT, lambda: output(tmp_path, "b"))
    mend["a"]()
    (tmp_path / "release").touch()
    finish(tmp_path, "a", a)
    finish(tmp_path, "b", b)


def assert_no_trial_failed(tmp_path, storage: str) -> None:
    trials = study_of(storage).trials
    assert [t.state for t in trials] == [COMPLETE, COMPLETE]
    assert all(t.value is not None and STOPS not in t.user_attrs for t in trials)
    sweep = tmp_path / "toy" / "sweeps" / STUDY
    for trial in trials:
        assert float(lr_factor(sweep / str(trial.number))) == trial.params["module.lr_factor"]
    assert "is dead" not in output(tmp_path, "b")
    assert "no longer this worker's" not in output(tmp_path, "a")


def start_a_and_b(tmp_path, on_a: list[str], on_b: list[str]) -> tuple:
    """Worker a, its trial held until released, and b, which runs the other trial, then waits."""
    a = start_worker(tmp_path, "a", [*on_a, *hold_until(tmp_path / "release")])
    wait_for(tmp_path / "toy" / "sweeps" / STUDY / "0" / "started")
    b = start_worker(tmp_path, "b", on_b)
    poll(lambda: "waiting for trial 0 on process" in output(tmp_path, "b"), TIMEOUT, lambda: "b")
    return a, b


@pytest.mark.slow
def test_a_journal_out_of_reach_for_longer_than_the_heartbeat_timeout_fails_no_trial(tmp_path):
    study_folder = tmp_path / "study"
    study_folder.mkdir()
    # Each worker reaches the journal through its own link to its folder.
    links = {name: tmp_path / f"via_{name}" for name in ("a", "b")}
    for link in links.values():
        link.symlink_to(study_folder)
    on_a, on_b = (outage_settings(str(links[name] / "optuna.journal")) for name in ("a", "b"))
    a, b = start_a_and_b(tmp_path, on_a, on_b)

    cut = {name: link.unlink for name, link in links.items()}
    mend = {name: functools.partial(link.symlink_to, study_folder) for name, link in links.items()}
    ride_out_an_outage(tmp_path, a, b, cut, mend)

    assert_no_trial_failed(tmp_path, str(study_folder / "optuna.journal"))


@pytest.mark.slow
def test_a_database_stopped_for_longer_than_the_heartbeat_timeout_fails_no_trial(
    tmp_path, postgres, request
):
    database = create_database(postgres, database_name(request))
    # a reaches the server's socket through a link of its own, under its own application name:
    # it is cut off first (link gone, sessions ended), and mended last.
    via_a = tmp_path / "via_a"
    via_a.symlink_to(postgres)
    database_a = database.replace(f"host={postgres}", f"host={via_a}") + "&application_name=a"
    a, b = start_a_and_b(tmp_path, outage_settings(database_a), outage_settings(database))

    def cut_a() -> None:
        via_a.unlink()
        end_sessions(database, application_name="a")

    cut = {"a": cut_a, "b": lambda: pg_ctl(postgres, "stop")}
    mend = {"a": lambda: via_a.symlink_to(postgres), "b": lambda: pg_ctl(postgres, "start")}
    ride_out_an_outage(tmp_path, a, b, cut, mend)

    assert_no_trial_failed(tmp_path, database)


def lr_factor(folder) -> str:
    overrides = OmegaConf.load(folder / ".hydra" / "overrides.yaml")
    return next(o for o in overrides if o.startswith("module.lr_factor=")).split("=")[1]


def end_sessions(database: str, application_name: str) -> None:
    engine = sqlalchemy.create_engine(database, poolclass=sqlalchemy.pool.NullPool)
    with engine.connect() as db:
        db.execute(
            sqlalchemy.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = :name"
            ),
            {"name": application_name},
        )


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


def test_a_trial_s_silence_is_timed_only_while_its_judge_reaches_the_journal(tmp_path, monkeypatch):
    folder = tmp_path / "study"
    folder.mkdir()
    storage = JournalStorage(JournalFileBackend(str(folder / "optuna.journal")))
    study = optuna.create_study(storage=storage)
    elsewhere = {**dead_worker(), "namespace": "another-boot/1"}  # nothing proves it dead
    beating, silent, unbeaten = (study.ask() for _ in range(3))
    for trial in (beating, silent):
        trial.set_user_attr(WORKER, elsewhere)
        beat(storage, trial._trial_id)
    unbeaten.set_user_attr(WORKER, elsewhere)
    monkeypatch.setattr(time, "time", lambda: time.monotonic() + 10_000)  # this host runs ahead
    contacts, timeout = Contacts(), 1
    silences = Silences(contacts, timeout)

    def judge(storage_timeout: float = 60) -> list[int]:
        call = lambda: resume_dead_trials(study, storage, silences)  # noqa: E731
        return retrying(call, "optuna.journal", storage_timeout, contacts)

    assert judge() == []  # silent: seen just now
    folder.rename(tmp_path / "away")  # out of reach for longer than the timeout
    cut_off = time.monotonic()
    poll(lambda: time.monotonic() - cut_off > 2 * timeout, 60, str)
    with pytest.raises(StorageLost):
        judge(storage_timeout=0)
    (tmp_path / "away").rename(folder)
    assert judge() == []  # silent for longer, but not while this worker reached the journal

    def judged() -> list[int]:
        beat(storage, beating._trial_id)  # beats on, as its live worker does
        return judge()

    assert poll(judged, 60, lambda: "silent is never judged dead") == [silent.number]
    assert [t.state for t in study.trials] == [RUNNING, WAITING, RUNNING]
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
    settings = {"spec": "optuna.journal", "owns": lambda t: True, "stop": lambda: stops.append(1)}
    with Beating(storage, [trial], 0.01, timeout=60, **settings) as b:
        assert beaten.wait(60)
    assert stops == [] and b.lost is None

    failures = itertools.count()  # fails for good
    with Beating(storage, [trial], 0.01, timeout=0, **settings) as b:
        poll(lambda: stops, 60, lambda: "no stop")
    assert stops == [1]
    assert b.lost.startswith("hydra.sweeper.storage=optuna.journal could not be reached")


def test_a_worker_whose_trial_was_put_back_stops_its_run_and_says_so(tmp_path):
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "optuna.journal")))
    trial = optuna.create_study(storage=storage).ask()
    trial.set_user_attr(WORKER, this_worker())
    stops = []
    with Beating(
        storage,
        [trial],
        0.01,
        "optuna.journal",
        60,
        owned_by_this_worker,
        stop=lambda: stops.append(1),
    ) as b:
        assert put_back(storage, storage.get_trial(trial._trial_id), "judged dead")
        poll(lambda: stops, 60, lambda: "the run goes on")
    assert (
        stops == [1]
        and b.lost is None
        and b.taken.startswith(
            f"Trial {trial.number} is no longer this worker's: another worker found its heartbeat "
            "silent and put it back (waiting now). Its run stops here"
        )
    )
