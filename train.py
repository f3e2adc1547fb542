"""Train a Transformer: `python train.py --help` lists the config groups and options.

`nmt-train`, the installed command, is the same entry (`transformer_nmt/cli/train.py`).
"""

from pathlib import Path

from transformer_nmt.cli.train import main

if __name__ == "__main__":
    main(Path(__file__).resolve().parent)
