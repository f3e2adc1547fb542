"""`nmt-train`, and `python train.py` in a checkout: the Hydra entry around `train(cfg)`.

Both take the same overrides (`nmt-train --help` lists the config groups and options). A checkout
composes its `conf/` and writes under the checkout, as `python train.py` always has; an installed
wheel composes the configs it carries and writes under the working directory (or PROJECT_ROOT).
"""

import os
import sys
from pathlib import Path

from omegaconf import DictConfig

from transformer_nmt.configs import checkout_root, config_dir

# glibc's default allocator returns large blocks to the kernel and maps them again every step:
# CPU training then spends a large share of its time in the kernel (experiments/allocator/).
# Keeping freed memory in the process avoids that; set GLIBC_TUNABLES yourself to opt out.
# hugetlb=1 asks for transparent huge pages where the kernel gives them on request: far fewer
# page faults as the heap grows (glibc 2.35+; older ones ignore it).
FAST_MALLOC = (
    "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736:glibc.malloc.hugetlb=1"
)
# Printed after Hydra's own message when the command line does not compose into a config.
HINT = (
    "hint: `--help` lists every config group, its options and every key; `--cfg job` prints "
    "the composed config; `+key=value` adds a key the config lacks, `~key` removes one."
)
composed = False  # whether Hydra got as far as calling `task`


def task(cfg: DictConfig) -> float | None:
    """Returns `cfg.optimized_metric` (best `val/bleu` by default) for Hydra sweepers."""
    global composed
    composed = True
    # Imported after Hydra has parsed --help, which needs no torch.
    from transformer_nmt.train import train
    from transformer_nmt.training.sweeps import optimized_metric

    return optimized_metric(cfg, train(cfg))


def restart_with_fast_malloc() -> None:
    """Start this command again with FAST_MALLOC: glibc reads GLIBC_TUNABLES at start-up only."""
    if sys.platform == "linux" and "GLIBC_TUNABLES" not in os.environ:
        os.environ["GLIBC_TUNABLES"] = FAST_MALLOC
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def main(root: Path | None = None) -> None:
    """Run Hydra on the command line; `root` is the checkout `python train.py` lives in."""
    restart_with_fast_malloc()
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
