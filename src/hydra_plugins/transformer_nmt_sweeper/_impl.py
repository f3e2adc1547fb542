"""One worker of an Optuna study that any number of workers share, run as a Hydra sweeper.

Each worker asks the study for trials while its `n_trials` leave any free, runs them through
Hydra's launcher (one after another, or `n_jobs` at once with a parallel launcher such as
`hydra/launcher=submitit_local`), and tells the study their values. A trial runs in the sweep
folder named by its number in the study, so workers never share a folder. While other workers'
trials run and none is free, it waits, putting back those whose worker is provably dead (see
`_trials.py`), so that the study ends with its `n_trials` and its results files.

A trial that did not end is resumed before any new trial is asked: a worker stopped by a signal
(SIGTERM, SIGUSR1, Ctrl-C) puts its trials back to wait as its runs save their `last.ckpt`, and
the next worker that asks (this command started again, or another) runs each again in its own
folder with its own parameters and seed, which goes on from that checkpoint.

Storage faults are ridden out: every call is tried again with backoff, and a worker that cannot
reach the storage for `storage_timeout` seconds stops, naming it (`StorageLost`), its running
trials left to the others. A worker that finds its trial taken from it stops that trial's run
and goes on asking.
"""

import functools
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import optuna
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf
from optuna.distributions import BaseDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from transformer_nmt.runtime.atomic import write_atomically
from transformer_nmt.runtime.lock_file import LockFile
from transformer_nmt.training.run.run_lock import LOCK_NAME
from transformer_nmt.training.run.stop import SIGNALS, exit_status
from transformer_nmt.training.run.sweeps import study_direction

from ._heartbeat import Beating, Silences, underlying
from ._space import keep_search_space, search_space
from ._storage import Contacts, StorageLost, open_storage, retrying, shown
from ._trials import (
    STOPS,
    claim_trials,
    counted_trials,
    finished_trials,
    owned_by_this_worker,
    put_back,
    resume_dead_trials,
    waiting_on,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
SAY_EVERY = 60.0  # seconds between a waiting worker's lines naming whom it waits for
# Seconds between a waiting worker's looks: it sees a trial end soon, at a few reads a minute.
WAIT_POLL = 2.0


class StudyWorker:
    """The sweeper's work: joins the study, runs trials while any is free, reports the best."""

    def __init__(
        self,
        sampler: Callable[..., BaseSampler],
        direction: str | None,
        storage: str | None,
        study_name: str | None,
        n_trials: int,
        n_jobs: int,
        max_failure_rate: float,
        params: DictConfig | None,
        heartbeat_interval: int | None = None,
        heartbeat_timeout: int = 120,
        storage_timeout: float = 600,
    ) -> None:
        self.make_sampler = sampler
        self.direction = direction
        self.storage_spec = storage
        self.study_name = study_name
        self.n_trials = n_trials
        self.n_jobs = n_jobs
        self.max_failure_rate = max_failure_rate
        self.params = params or {}
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self.storage_timeout = storage_timeout

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        # Before any trial: a study that would optimise its metric the wrong way is refused.
        self.direction = study_direction(config.get("optimized_metric"), self.direction)
        self.launcher = Plugins.instance().instantiate_launcher(
            config=config, hydra_context=hydra_context, task_function=task_function
        )

    def sweep(self, arguments: list[str]) -> None:
        space, fixed = search_space([*(f"{k}={v}" for k, v in self.params.items()), *arguments])
        self.storage = open_storage(self.storage_spec, self.heartbeat_interval)
        self.contacts = Contacts()
        # Without heartbeats only a process gone proves a worker dead: a live trial never beats.
        silences = None
        if self.heartbeat_interval is not None:
            silences = Silences(self.contacts, self.heartbeat_timeout)
        study = self._retrying(lambda: self._join(space))
        fixed_overrides = [f"{name}={value}" for name, value in fixed.items()]
        said: tuple[float, list[int]] | None = None
        while True:
            self._retrying(lambda: resume_dead_trials(study, self.storage, silences))
            trials = self._retrying(lambda: claim_trials(study, self.n_trials, self.n_jobs, space))
            if trials:
                self._run(study, trials, fixed_overrides)
                continue
            if self.heartbeat_interval is None:  # no heartbeats: nothing can prove a trial dead
                break
            running = self._retrying(lambda: waiting_on(study, self.storage))
            if not running:
                break
            said = _say_waiting(study, running, said)
            time.sleep(min(self.heartbeat_interval, WAIT_POLL))
        self._report(study)

    def _join(self, space: dict) -> optuna.Study:
        study = optuna.create_study(
            study_name=self.study_name,
            storage=self.storage,
            sampler=_sampler(self.make_sampler),
            direction=self.direction,
            load_if_exists=True,
        )
        keep_search_space(study, space)
        self._check_n_trials(study)
        return study

    def _retrying(self, call: Callable[[], T]) -> T:
        return retrying(call, self.storage_spec, self.storage_timeout, self.contacts)

    def _check_n_trials(self, study: optuna.Study) -> None:
        done = len(finished_trials(study))
        if done > self.n_trials:
            raise ValueError(
                f"hydra.sweeper.n_trials={self.n_trials} is below the {done} trials that study "
                f"{study.study_name} has already finished. n_trials counts the whole study: give "
                f"hydra.sweeper.n_trials={done} or more, or a new hydra.sweeper.study_name."
            )
        running = len(counted_trials(study)) - done
        log.info(
            "Study %s: %d of n_trials=%d finished, %d running or waiting; storage %s",
            study.study_name,
            done,
            self.n_trials,
            running,
            shown(self.storage_spec),
        )

    def _run(self, study: optuna.Study, trials: list[optuna.Trial], fixed: list[str]) -> None:
        """Runs the trials through the launcher and tells their values.

        A stop signal stops the runs (each saves its `last.ckpt`), puts the trials back to wait
        and stops this worker; a trial taken from this worker stops them too, and the worker
        goes on asking.
        """
        overrides = [
            (
                *(f"{name}={value}" for name, value in trial.params.items()),
                *fixed,
                f"hydra.sweep.subdir={trial.number}",  # the study's number: no folder shared
            )
            for trial in trials
        ]
        beating = Beating(
            self.storage,
            trials,
            self.heartbeat_interval,
            self.storage_spec,
            self.storage_timeout,
            owns=owned_by_this_worker,
            contacts=self.contacts,
        )
        # Between two runs too, a stop signal is only recorded: the worker puts its trials back.
        with SIGNALS.recording(), beating:
            for trial in trials:
                if trial.user_attrs.get(STOPS):
                    self._wait_for_folder(trial.number)
            try:
                returns = self.launcher.launch(overrides, initial_job_idx=trials[0].number)
            except SystemExit as stop:  # a run stopped: by a signal, or by the heartbeat
                if beating.lost:
                    raise StorageLost(beating.lost) from None
                self._put_back(study, trials, beating.taken or f"stopped (exit status {stop.code})")
                if beating.taken:
                    return
                raise
        if beating.lost:
            raise StorageLost(beating.lost)
        errors = [
            self._retrying(lambda t=trial, r=ret: _tell(study, t, r))
            for trial, ret in zip(trials, returns, strict=True)
        ]
        if SIGNALS.received and not beating.taken:  # came as the last run ended: told, then stop
            raise SystemExit(exit_status(SIGNALS.received[0]))
        failed = [e for e in errors if e is not None]
        if len(failed) / len(trials) > self.max_failure_rate:
            raise RuntimeError(
                f"{len(failed)} of {len(trials)} trials failed, more than "
                f"hydra.sweeper.max_failure_rate={self.max_failure_rate}"
            ) from failed[0]

    def _wait_for_folder(self, number: int) -> None:
        """Waits until no run holds the resumed trial's folder: the worker that left it may live
        on, cut off from the storage, until it finds its trial taken and stops; a crashed host's
        lock is taken over once stale (`runtime/lock_file.py`)."""
        lock = LockFile(Path(self.config.hydra.sweep.dir) / str(number) / LOCK_NAME)
        lock.acquire_waiting()
        lock.release()  # for the trial's run to take

    def _put_back(self, study: optuna.Study, trials: list[optuna.Trial], why: str) -> None:
        """Puts this worker's trials among `trials` back to wait, to be resumed first."""

        def put_back_own() -> list[int]:
            own = [underlying(self.storage).get_trial(t._trial_id) for t in trials]
            own = [t for t in own if owned_by_this_worker(t)]
            return [t.number for t in own if put_back(self.storage, t, why)]

        if numbers := self._retrying(put_back_own):
            log.warning(
                "Trials %s %s: put back to wait, to be resumed from their last checkpoints by "
                "the next worker that asks (the same command again)",
                ", ".join(map(str, numbers)),
                why,
            )

    def _report(self, study: optuna.Study) -> None:
        """Writes the study's table and best trial to the sweep folder once every trial has ended.

        Only then: every worker that writes them writes the same, so none overwrites a later
        state with an earlier one.
        """
        if len(finished_trials(study)) < self.n_trials:
            log.info("Trials still run in other workers; the last worker writes the results")
            return
        sweep_dir = self.config.hydra.sweep.dir
        write_atomically(f"{sweep_dir}/trials.csv", study.trials_dataframe().to_csv(index=False))
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not complete:
            log.warning("No trial of study %s completed: there is no best one", study.study_name)
            return
        best = study.best_trial
        results = {"name": "optuna", "best_params": best.params, "best_value": best.value}
        write_atomically(
            f"{sweep_dir}/optimization_results.yaml", OmegaConf.to_yaml(OmegaConf.create(results))
        )
        log.info("Best trial %d: value %s, parameters %s", best.number, best.value, best.params)


def _tell(study: optuna.Study, trial: optuna.Trial, ret: JobReturn) -> Exception | None:
    """Tells the study how a trial ended; the error that failed it, if one did."""
    error = None
    try:
        value = ret.return_value  # raises the error that failed the job
        if value is None:
            raise ValueError("the run returned no value (see its train.log)")
    except Exception as e:
        log.warning("Trial %d failed: %r", trial.number, e)
        error, value = e, None
    storage = study._storage
    if storage.get_trial(trial._trial_id).state == TrialState.WAITING:
        # Put back meanwhile (its heartbeat judged silent): it ended all the same, so its end is
        # told, not run again, unless another worker has just taken it.
        storage.set_trial_state_values(trial._trial_id, state=TrialState.RUNNING)
    try:
        # A value that is not finite fails the trial too (Optuna's rule).
        study.tell(trial, value, state=TrialState.FAIL if error else None)
    except (ValueError, UpdateFinishedTrialError):
        # An earlier try stored it before its connection dropped, or another worker resumed the
        # trial from this run's last checkpoint and told the same end first.
        told = storage.get_trial(trial._trial_id)
        log.info("Trial %d was told before: %s, %s", trial.number, told.state.name, told.value)
    return error


def _say_waiting(
    study: optuna.Study, running: dict[int, str], said: tuple[float, list[int]] | None
) -> tuple[float, list[int]]:
    """Logs the trials this worker waits for, when they change and every `SAY_EVERY` seconds."""
    numbers, now = sorted(running), time.monotonic()
    if said is not None and said[1] == numbers and now - said[0] < SAY_EVERY:
        return said
    whom = "; ".join(f"trial {number} on {running[number]}" for number in numbers)
    log.info("Study %s: no trial free; waiting for %s", study.study_name, whom)
    return now, numbers


def _sampler(make: Callable[..., BaseSampler]) -> BaseSampler:
    """The configured sampler, seeded per trial where a seed is given (see `TrialSeeded`)."""
    seed = make.keywords.get("seed") if isinstance(make, functools.partial) else None
    return make() if seed is None else TrialSeeded(make, seed)


class TrialSeeded(BaseSampler):
    """Samples trial k with a new sampler seeded `seed + k`.

    A sampler seeded once per worker would give every worker the same parameters; reseeded at
    random, none could be reproduced. Seeded by the trial's number, a trial draws the same
    parameters from the same study history whichever worker asks it, and no two trials share a
    seed.
    """

    def __init__(self, make: Callable[..., BaseSampler], seed: int) -> None:
        self.make = make
        self.seed = seed
        self.sampler = make(seed=seed)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.sampler = self.make(seed=self.seed + trial.number)
        self.sampler.before_trial(study, trial)

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.sampler.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict:
        return self.sampler.sample_relative(study, trial, search_space)

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> object:
        return self.sampler.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self.sampler.after_trial(study, trial, state, values)
