"""Train a Transformer: `python train.py --help` lists the config groups and options."""

import os
from pathlib import Path

import hydra
from omegaconf import DictConfig

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> None:
    from transformer_nmt.train import train  # after Hydra has parsed --help, which needs no torch

    train(cfg)


if __name__ == "__main__":
    main()
