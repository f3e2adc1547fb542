"""The most autocast's casts can cost a bf16 training step: the same step with bf16 weights.

Under CPU bf16 autocast every matmul casts its fp32 weight and, where the residual stream is
fp32, its input; the backward casts the gradients back. A model whose weights are bf16, run
without autocast, does none of that (and is not how anyone should train: its Adam updates
round to bf16). Its speed is therefore an upper bound on what removing the casts could buy.
Our model on the speed benchmark's bf16 batches, the two modes alternating, fresh model and
Adam each run, the median of the rounds:

    python -m experiments.speed.cast_bound --sizes small,base --rounds 3
"""

import argparse
import os
import statistics

import torch

from experiments.common.batches import multi30k_lengths, target_tokens, training_batches
from experiments.common.machine import cpu_description
from experiments.common.peers import SIZES, build
from experiments.common.timing import round_order
from experiments.common.training import time_training
from transformer_nmt.runtime.allocator import use_fast_malloc

MODES = ["autocast", "bf16 weights"]


def tokens_per_second(size_name: str, batches: list[dict], warmup: int, mode: str) -> float:
    """Target tokens a second over batches[warmup:] in `mode`: "autocast" or "bf16 weights"."""
    peer = build("ours", SIZES[size_name])
    if mode == "bf16 weights":
        peer.model.to(torch.bfloat16)
    precision = "bf16" if mode == "autocast" else "fp32"  # "fp32": no autocast
    seconds = time_training(peer, batches, warmup, precision)
    return target_tokens(batches[warmup:]) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="small,base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", 2)))
    print(cpu_description())
    src, tgt, _ = multi30k_lengths()
    print("| size | autocast, tokens/s | bf16 weights, tokens/s | bound on the casts' share |")
    print("|---|---|---|---|")
    for size_name in args.sizes.split(","):
        vocab = SIZES[size_name].vocab
        batches = training_batches(src, tgt, vocab, args.warmup + args.steps, "bf16")
        speeds = {mode: [] for mode in MODES}
        for round_ in range(args.rounds):
            for mode in round_order(MODES, round_):
                speeds[mode].append(tokens_per_second(size_name, batches, args.warmup, mode))
        auto, pure = (statistics.median(speeds[mode]) for mode in MODES)
        print(f"| {size_name} | {auto:,.0f} | {pure:,.0f} | {1 - auto / pure:.1%} |")


if __name__ == "__main__":
    use_fast_malloc()  # the allocator train.py runs with (experiments/allocator/)
    main()
