"""`hydra.sweeper._target_` of `conf/hparams_search/`: the Optuna sweeper, resumable."""

from typing import Any

from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper


class ResumableOptunaSweeper(OptunaSweeper):
    """Takes the Optuna sweeper's config; a stored study runs only the trials it still lacks."""

    def __init__(self, **config: Any) -> None:
        # The parent only builds its implementation; ours replaces it (imported here: see
        # __init__.py).
        from ._impl import ResumableOptunaSweeperImpl

        self.sweeper = ResumableOptunaSweeperImpl(**config)
