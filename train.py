"""Train a Transformer: `python train.py --help` lists the config groups and options."""

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    from transformer_nmt.allocator import use_fast_malloc

    use_fast_malloc()  # first: glibc reads its allocator setting at start-up only

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
