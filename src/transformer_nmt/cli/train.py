"""`nmt-train`, and `python train.py` in a checkout: the Hydra entry around `train(cfg)`.

Both take the same overrides (`nmt-train --help` lists the config groups and options). A checkout
composes its `conf/` and writes under the checkout, as `python train.py` always has; an installed
wheel composes the configs it carries and writes under the working directory (or PROJECT_ROOT).
"""

import os
import re
import shutil
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from transformer_nmt.runtime.allocator import use_expandable_segments, use_fast_malloc
from transformer_nmt.runtime.configs import checkout_root, config_dir
from transformer_nmt.training.fine_tuning.renamed_keys import override_keys, renamed_problem
from transformer_nmt.training.plan.run_config import register_resolvers

# Printed after Hydra's own message when the command line does not compose into a config.
HINT = (
    "hint: `--help` lists every config group, its options and every key; `--cfg job` prints "
    "the composed config; `+key=value` adds a key the config lacks, `~key` removes one."
)
# The run's log files (conf/hydra/default.yaml), all a run refused at its start leaves.
LOG_FILE = re.compile(r"train(\.rank\d+)?\.log")
composed = False  # whether the command line composed into a config (see `Composed`)
# At import: also where a pickled `task` is loaded to run a job (submitit's SLURM jobs).
register_resolvers()


class Composed(Callback):
    """Hydra calls it once the command line has composed, before the run or the sweep starts:
    an error after that (a study that cannot be reached) is not the command line's."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        global composed
        composed = True

    on_multirun_start = on_run_start


class DeliberateError(CompactHydraException):
    """An error raised on purpose, whose message says what is wrong and what to do: Hydra prints
    it without a traceback, which stays for bugs (and with HYDRA_FULL_ERROR=1)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")


def task(cfg: DictConfig) -> float | None:
    """Returns `cfg.optimized_metric` (best `val/bleu` by default) for Hydra sweepers."""
    # Imported after Hydra has parsed --help, which needs no torch.
    from transformer_nmt.train import train
    from transformer_nmt.training.run.sweeps import optimized_metric

    try:
        return optimized_metric(cfg, train(cfg))
    except deliberate_errors() as error:
        remove_unused_run_folder()
        raise DeliberateError(error) from error


def remove_unused_run_folder() -> None:
    """A refused run leaves no run folder: Hydra made it as the job started, and the run was
    refused before writing anything into it but its log (`train.log`, `train.rank<R>.log`)."""
    folder = Path(HydraConfig.get().runtime.output_dir)
    if folder.is_dir() and all(LOG_FILE.fullmatch(p.name) for p in folder.iterdir()):
        shutil.rmtree(folder, ignore_errors=True)  # the other ranks may remove it too


def deliberate_errors() -> tuple[type[Exception], ...]:
    """The errors a run raises on purpose: a config problem, a locked run folder, an unreadable
    checkpoint, bad data, a W&B run that cannot be continued, a batch that fits no memory, a full
    disk, and a failure met on another rank (whose own log holds its traceback)."""
    from transformer_nmt.checkpoint import CheckpointError
    from transformer_nmt.data.corpus import DataError
    from transformer_nmt.data.token_budget import BudgetError
    from transformer_nmt.runtime.atomic import DiskFullError
    from transformer_nmt.runtime.wandb_run import WandbRunError
    from transformer_nmt.training.plan.config_checks import ConfigError
    from transformer_nmt.training.plan.refusals import RankRefused
    from transformer_nmt.training.run.run_lock import RunLockedError

    return (
        ConfigError,
        RunLockedError,
        CheckpointError,
        DataError,
        WandbRunError,
        BudgetError,
        RankRefused,
        DiskFullError,
    )


def main(root: Path | None = None) -> None:
    """Run Hydra on the command line; `root` is the checkout `python train.py` lives in."""
    if problem := renamed_problem(override_keys(sys.argv[1:])):
        sys.exit(f"error: {problem}")  # Hydra would only say the key is not in the config
    use_expandable_segments()  # before CUDA's allocator starts; every rank inherits it
    use_fast_malloc()  # glibc reads its setting at start-up only: this starts the process again
    import hydra

    root = root or checkout_root()
    if root is not None:
        os.environ.setdefault("PROJECT_ROOT", str(root))
    entry = hydra.main(version_base="1.3", config_path=str(config_dir(root)), config_name="train")
    try:
        entry(task)()
    except SystemExit as error:
        if error.code and not composed:  # Hydra has printed why the command line did not compose
            print(HINT, file=sys.stderr)
        raise


if __name__ == "__main__":
    main()
