"""`nmt-train`, and `python train.py` in a checkout: the Hydra entry around `train(cfg)`.

Both take the same overrides (`nmt-train --help` lists the config groups and options). A checkout
composes its `conf/` and writes under the checkout, as `python train.py` always has; an installed
wheel composes the configs it carries and writes under the working directory (or PROJECT_ROOT).
"""

import os
import sys
from pathlib import Path

from omegaconf import DictConfig

from transformer_nmt.allocator import use_expandable_segments, use_fast_malloc
from transformer_nmt.configs import checkout_root, config_dir
from transformer_nmt.run_names import register_resolvers

# Printed after Hydra's own message when the command line does not compose into a config.
HINT = (
    "hint: `--help` lists every config group, its options and every key; `--cfg job` prints "
    "the composed config; `+key=value` adds a key the config lacks, `~key` removes one."
)
composed = False  # whether Hydra got as far as calling `task`
# At import: also where a pickled `task` is loaded to run a job (submitit's SLURM jobs).
register_resolvers()


def task(cfg: DictConfig) -> float | None:
    """Returns `cfg.optimized_metric` (best `val/bleu` by default) for Hydra sweepers."""
    global composed
    composed = True
    # Imported after Hydra has parsed --help, which needs no torch.
    from transformer_nmt.train import train
    from transformer_nmt.training.sweeps import optimized_metric

    return optimized_metric(cfg, train(cfg))


def main(root: Path | None = None) -> None:
    """Run Hydra on the command line; `root` is the checkout `python train.py` lives in."""
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
