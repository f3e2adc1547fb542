"""Padding efficiency of token-budget batches on Multi30k train: bucketed vs random.

Efficiency = real tokens / all tokens of the padded (B, S) and (B, T) tensors, both sides
together. Random batches have the bucketed batches' average size, so both runs hold the same
number of sentences per step. Usage, from the repo root:

    python experiments/padding_efficiency/padding_efficiency.py [--data-dir ../shared/data]
"""

import argparse
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from transformer_nmt.data.batching import TokenBatchSampler

ROOT = Path(__file__).resolve().parents[2]


def efficiency(batches: list[np.ndarray], src: np.ndarray, tgt: np.ndarray) -> float:
    real = sum(src[b].sum() + tgt[b].sum() for b in batches)
    padded = sum(len(b) * (src[b].max() + tgt[b].max()) for b in batches)
    return real / padded


def random_batches(n: int, size: int, seed: int) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    return np.array_split(order, max(1, round(n / size)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    args = parser.parse_args()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                "experiment=multi30k_de_en",
                f"paths.root_dir={ROOT}",
                f"paths.data_dir={args.data_dir}",
            ],
        )
    datamodule = instantiate(cfg.data)
    datamodule.setup("fit")
    train = datamodule.datasets["train"]
    src, tgt = np.asarray(train.src_lengths), np.asarray(train.tgt_lengths)
    print(f"Multi30k train de->en, {len(src)} pairs, BPE {cfg.data.vocab_size}, seed 0, epoch 0\n")
    print("| max_tokens | batches | sentences/batch | bucketed | random, same size |")
    print("|---:|---:|---:|---:|---:|")
    for max_tokens in args.max_tokens:
        bucketed = [np.asarray(b) for b in TokenBatchSampler(src, tgt, max_tokens, seed=0)]
        size = len(src) / len(bucketed)
        shuffled = random_batches(len(src), round(size), seed=0)
        print(
            f"| {max_tokens} | {len(bucketed)} | {size:.1f} | "
            f"{efficiency(bucketed, src, tgt):.1%} | {efficiency(shuffled, src, tgt):.1%} |"
        )


if __name__ == "__main__":
    main()
