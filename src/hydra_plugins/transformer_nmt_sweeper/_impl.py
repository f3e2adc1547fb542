"""Resuming an Optuna study: count what it has done, fail what a stopped process left running.

hydra-optuna-sweeper 1.3.0 asks for `n_trials` new trials on every start, whatever the study
already holds, and numbers the trial folders from 0 again. Here `n_trials` is the size of the
whole search: a start runs only the trials still missing, in folders numbered as the study's
trials, with a sampler seeded afresh. Assumes one process per study (trials RUNNING at start are
a stopped process's).
"""

import logging
from pathlib import Path

import optuna
from hydra_plugins.hydra_optuna_sweeper._impl import OptunaSweeperImpl
from optuna.trial import TrialState
from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

# User attribute of a trial that was running when its process stopped: it ran to no end, so it
# does not count as one of the search's n_trials.
INTERRUPTED = "interrupted"


class ResumableOptunaSweeperImpl(OptunaSweeperImpl):
    def sweep(self, arguments: list[str]) -> None:
        if self.storage:
            study = self._load_study()
            interrupted = fail_interrupted_trials(study)
            done = len(finished_trials(study))
            log.info(
                "Study %s holds %d finished trials (%d interrupted ones failed now); "
                "%d of n_trials=%d to go",
                study.study_name,
                done,
                len(interrupted),
                max(self.n_trials - done, 0),
                self.n_trials,
            )
            self.n_trials = max(self.n_trials - done, 0)
            self.job_idx = next_trial_number(study)  # the trial's number names its folder
            if study.trials and isinstance(self.sampler, optuna.samplers.BaseSampler):
                # Seeded again as at the first start, it would ask the first trials' parameters
                # again: a resumed search draws new random numbers (and is not reproducible).
                self.sampler.reseed_rng()
        super().sweep(arguments)

    def _load_study(self) -> optuna.Study:
        url = make_url(self.storage)
        if url.get_backend_name() == "sqlite" and url.database:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)  # SQLite makes no folders
        return optuna.create_study(
            study_name=self.study_name,
            storage=self.storage,
            directions=self._get_directions(),
            load_if_exists=True,
        )


def finished_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials that ran to an end: complete, pruned, or failed by their own error."""
    ended = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return [t for t in study.get_trials(states=ended) if not t.user_attrs.get(INTERRUPTED)]


def next_trial_number(study: optuna.Study) -> int:
    """The number of the trial the search asks for next: the first enqueued one, else a new one."""
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    return min((t.number for t in waiting), default=len(study.trials))


def fail_interrupted_trials(study: optuna.Study) -> list[int]:
    """Marks RUNNING trials failed and interrupted, so that none blocks the study; their numbers."""
    numbers = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        optuna.trial.Trial(study, trial._trial_id).set_user_attr(INTERRUPTED, True)
        study.tell(trial.number, state=TrialState.FAIL)
        log.warning("Trial %d was running when its sweep stopped: marked failed", trial.number)
        numbers.append(trial.number)
    return numbers
