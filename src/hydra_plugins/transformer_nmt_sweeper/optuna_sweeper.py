"""`hydra.sweeper._target_` of `conf/hydra/sweeper/optuna_study.yaml`: a study's worker."""

from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class OptunaSweeper(Sweeper):
    """Joins the study `study_name` in `storage` and runs trials until its `n_trials` are taken."""

    def __init__(self, **config: Any) -> None:
        from ._impl import StudyWorker  # imported here: see __init__.py

        self.worker = StudyWorker(**config)

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.worker.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> None:
        self.worker.sweep(arguments)
