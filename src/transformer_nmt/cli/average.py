"""`nmt-average`: write a checkpoint whose weights average those of several (paper: last 5)."""

import argparse
import sys
from pathlib import Path

from transformer_nmt.checkpoint import (
    CheckpointError,
    average_checkpoints,
    resolve_checkpoints,
    save_atomically,
)
from transformer_nmt.cli.search_args import positive_int


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "checkpoints", nargs="+", help="the .ckpt files to average, or a folder with --average-last"
    )
    parser.add_argument(
        "--average-last",
        type=positive_int,
        metavar="N",
        help="average the folder's last N periodic checkpoints",
    )
    parser.add_argument("--output", type=Path, required=True, help="the averaged .ckpt to write")
    args = parser.parse_args(argv)

    try:
        paths = resolve_checkpoints(args.checkpoints, args.average_last)
        save_atomically(average_checkpoints(paths), args.output)
    except (CheckpointError, OSError) as e:
        sys.exit(f"error: {e}")
    print(f"{args.output}: the average of {', '.join(str(p) for p in paths)}")


if __name__ == "__main__":
    main()
