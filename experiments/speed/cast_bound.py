"""The most autocast's casts can cost a bf16 training step: the same step with bf16 weights.

Under CPU bf16 autocast every matmul casts its fp32 weight and, where the residual stream is
fp32, its input; the backward casts the gradients back. A model whose weights are bf16, run
without autocast, does none of that (and is not how anyone should train: its Adam updates
round to bf16). Its speed is therefore an upper bound on what removing the casts could buy.
The benchmark's `ours` on the benchmark's bf16 batches, the two modes alternating, fresh
model and Adam each run, the median of the rounds:

    python experiments/speed/cast_bound.py --sizes small,base --rounds 3
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "experiments" / "speed")]
from transformer_nmt.allocator import use_fast_malloc  # noqa: E402

if __name__ == "__main__":
    use_fast_malloc()  # the allocator train.py runs with (experiments/allocator/)

import benchmark  # noqa: E402
from benchmark import SIZES, build, time_training, training_work  # noqa: E402
from experiments.machine import cpu_description  # noqa: E402


def tokens_per_second(size_name: str, batches: list[dict], warmup: int, mode: str) -> float:
    """Target tokens a second over batches[warmup:] in `mode`: "autocast" or "bf16 weights"."""
    impl = build("ours", SIZES[size_name])
    if mode == "bf16 weights":
        impl.model.to(torch.bfloat16)
    precision = "bf16" if mode == "autocast" else "fp32"  # "fp32": no autocast
    seconds = time_training(impl, batches, warmup, precision)
    tokens, _ = training_work(SIZES[size_name], batches[warmup:])
    return tokens / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="small,base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", 2)))
    print(cpu_description())
    src, tgt, _ = benchmark.multi30k_lengths()
    print("| size | autocast, tokens/s | bf16 weights, tokens/s | bound on the casts' share |")
    print("|---|---|---|---|")
    for size_name in args.sizes.split(","):
        batches = benchmark.training_batches(
            src, tgt, SIZES[size_name].vocab, args.warmup + args.steps, "bf16"
        )
        speeds = {"autocast": [], "bf16 weights": []}
        for round_ in range(args.rounds):
            modes = list(speeds) if round_ % 2 == 0 else list(speeds)[::-1]
            for mode in modes:
                speeds[mode].append(tokens_per_second(size_name, batches, args.warmup, mode))
        auto, pure = (statistics.median(speeds[mode]) for mode in speeds)
        print(f"| {size_name} | {auto:,.0f} | {pure:,.0f} | {1 - auto / pure:.1%} |")


if __name__ == "__main__":
    main()
