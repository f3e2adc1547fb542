"""Train a Transformer: `python train.py --help` lists the config groups and options."""

import os
import sys
from pathlib import Path

# glibc's default allocator returns large blocks to the kernel and maps them again every step:
# CPU training then spends a large share of its time in the kernel (experiments/allocator/).
# Keeping freed memory in the process avoids that; set GLIBC_TUNABLES yourself to opt out.
# hugetlb=1 asks for transparent huge pages where the kernel gives them on request: far fewer
# page faults as the heap grows (glibc 2.35+; older ones ignore it).
FAST_MALLOC = (
    "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736:glibc.malloc.hugetlb=1"
)
if __name__ == "__main__" and sys.platform == "linux" and "GLIBC_TUNABLES" not in os.environ:
    os.environ["GLIBC_TUNABLES"] = FAST_MALLOC  # read by glibc at start-up only: start again
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))


# Printed after Hydra's own message when the command line does not compose into a config.
HINT = (
    "hint: `python train.py --help` lists every config group, its options and every key; "
    "`python train.py --cfg job` prints the composed config; `+key=value` adds a key the config "
    "lacks, `~key` removes one."
)
composed = False  # whether Hydra got as far as calling `main`


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Returns `cfg.optimized_metric` (best `val/bleu` by default) for Hydra sweepers."""
    global composed
    composed = True
    # Imported after Hydra has parsed --help, which needs no torch.
    from transformer_nmt.train import train
    from transformer_nmt.training.sweeps import optimized_metric

    return optimized_metric(cfg, train(cfg))


if __name__ == "__main__":
    try:
        main()
    except SystemExit as error:
        if error.code and not composed:  # Hydra has printed why the command line did not compose
            print(HINT, file=sys.stderr)
        raise
