"""The label-smoothed loss, forward and backward on CPU logits, by block size .

`training/step/loss.py` walks the (N, V) logits `CPU_BLOCK_ELEMENTS` at a time on CPUs; "whole" is
one block, as the loss ran before. Random logits, best of --repeats, milliseconds:

    OMP_NUM_THREADS=2 python -m experiments.speed.loss_blocks
"""

import argparse

import torch

from experiments.common.machine import cpu_description, load_average
from experiments.common.timing import seconds
from transformer_nmt.training.step import loss

SHAPES = ((1000, 8000), (3600, 32000))  # model=small's Multi30k vocabulary; base's 32k
BLOCKS = {"whole": 2**62, "2^16": 2**16, "2^18": 2**18, "2^20": 2**20}


def milliseconds(logits: torch.Tensor, target: torch.Tensor, repeats: int) -> float:
    def forward_backward(x: torch.Tensor) -> None:
        loss_sum, _ = loss.label_smoothed_nll(x, target, 0.1)
        loss_sum.backward()

    times = []
    for _ in range(repeats + 1):  # the first call is a warm-up
        x = logits.clone().requires_grad_()  # outside the timing
        times.append(seconds(lambda: forward_backward(x)))  # noqa: B023 (called at once)
    return min(times[1:]) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_description()}; {args.threads} threads; {load_average()}\n")
    print("| logits | " + " | ".join(BLOCKS) + " |")
    print("|---|" + "---|" * len(BLOCKS))
    for n, vocab in SHAPES:
        g = torch.Generator().manual_seed(0)
        logits32 = 3 * torch.randn(n, vocab, generator=g)
        target = torch.randint(0, vocab, (n,), generator=g)
        for dtype in (torch.bfloat16, torch.float32):
            logits, row = logits32.to(dtype), []
            for elements in BLOCKS.values():
                loss.CPU_BLOCK_ELEMENTS = elements
                row.append(f"{milliseconds(logits, target, args.repeats):.1f}")
            print(f"| {dtype} {n} x {vocab} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
