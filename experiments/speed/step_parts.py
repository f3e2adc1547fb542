"""Where the Multi30k recipe's training step goes, and what each Adam implementation costs it.

The recipe's model (`experiment=multi30k_de_en`, model=narrow) on its batches: real Multi30k
lengths, random ids (experiments/common/batches.py). Prints three tables: the parts of a step
(forward, output projection, loss, backward, fused Adam) by wall clock, one Adam step over the
model's weights in each implementation torch offers, and the speed of the step's matrix
products in each operand layout. The record: experiments/speed/README.md.

    OMP_NUM_THREADS=2 python -m experiments.speed.step_parts
"""

import argparse
import statistics
import time

import torch
from torch import nn

from experiments.common.batches import multi30k_lengths, training_batches
from experiments.common.machine import cpu_name, load_average
from experiments.common.peers import EPSILON
from transformer_nmt.cli.compose import compose_group
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.model import Transformer
from transformer_nmt.runtime.allocator import use_fast_malloc
from transformer_nmt.training.step.loss import label_smoothed_nll

PARTS = ["forward without the output projection", "output projection", "label-smoothed loss"]
PARTS += ["backward", "Adam, fused"]


# The recipe as training composes it (model=narrow, data=multi30k with the experiment's values).
RECIPE = ["experiment=multi30k_de_en"]
MODEL = compose_group("model", "narrow", RECIPE)
DATA = compose_group("data", "multi30k", RECIPE)


def recipe_model() -> Transformer:
    torch.manual_seed(0)
    m = MODEL
    return Transformer(
        DATA.vocab_size, PAD_ID, N=m.N, d_model=m.d_model, d_ff=m.d_ff, h=m.h, dropout=m.dropout
    )


class Timed(nn.Module):
    """Wraps the output projection to add its wall time to `seconds`."""

    def __init__(self, projection: nn.Module, seconds: dict[str, float]) -> None:
        super().__init__()
        self.projection, self.seconds = projection, seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        y = self.projection(x)
        self.seconds["output projection"] += time.perf_counter() - start
        return y


def step_parts(batches: list[dict], warmup: int) -> dict[str, float]:
    """Milliseconds a step in each part, over batches[warmup:]."""
    model = recipe_model().train()
    optimizer = torch.optim.Adam(
        model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True
    )
    seconds = dict.fromkeys(PARTS, 0.0)
    model.generator = Timed(model.generator, seconds)
    for i, batch in enumerate(batches):
        if i == warmup:
            seconds.update(dict.fromkeys(PARTS, 0.0))
        t0 = time.perf_counter()
        index = batch["tgt_index"]
        logits = model(batch["src"], batch["tgt_in"], index)
        t1 = time.perf_counter()
        target = batch["tgt_out"].flatten().index_select(0, index)
        loss, _ = label_smoothed_nll(logits, target, EPSILON)
        t2 = time.perf_counter()
        (loss / index.numel()).backward()
        t3 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        for part, spent in zip(PARTS[2:], (t2 - t1, t3 - t2, t4 - t3), strict=True):
            seconds[part] += spent
        seconds[PARTS[0]] += t1 - t0
    seconds[PARTS[0]] -= seconds["output projection"]  # timed inside the forward
    return {part: s / (len(batches) - warmup) * 1000 for part, s in seconds.items()}


def adam_ms(implementation: dict, steps: int) -> float:
    params = list(recipe_model().parameters())
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-9, **implementation)
    for _ in range(3):
        optimizer.step()
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.step()
    return (time.perf_counter() - start) / steps * 1000


def gemm_gflops(m: int, k: int, n: int, repeats: int = 20) -> dict[str, float]:
    """GFLOP/s of an (m, k) by (k, n) product in each operand layout a linear layer uses."""
    x, w, g = torch.randn(m, k), torch.randn(n, k), torch.randn(m, n)
    layouts = {
        "`x @ W.T` (forward)": lambda: x @ w.T,
        "`g @ W` (input gradient)": lambda: g @ w,
        "`g.T @ x` (weight gradient)": lambda: g.T @ x,
    }
    speeds = {}
    for name, product in layouts.items():
        for _ in range(3):
            product()
        start = time.perf_counter()
        for _ in range(repeats):
            product()
        speeds[name] = 2 * m * k * n * repeats / (time.perf_counter() - start) / 1e9
    return speeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps before them")
    parser.add_argument("--adam-steps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()}, {args.threads} thread(s); torch {torch.__version__}; "
          f"{load_average()}")  # fmt: skip

    src, tgt, _ = multi30k_lengths(DATA)
    batches = training_batches(src, tgt, DATA.vocab_size, args.warmup + args.steps, data=DATA)
    tokens = statistics.mean(b["tgt_index"].numel() for b in batches[args.warmup :])
    print(f"\n{args.steps} steps after {args.warmup}, {tokens:.0f} target tokens a batch\n")
    print("| part of the step | ms | share |\n|---|---|---|")
    parts = step_parts(batches, args.warmup)
    total = sum(parts.values())
    for part, ms in parts.items():
        print(f"| {part} | {ms:.1f} | {ms / total:.0%} |")
    print(f"| total | {total:.1f} | |")

    print(f"\nOne Adam step over the recipe's weights (mean of {args.adam_steps})\n")
    print("| implementation | ms a step |\n|---|---|")
    for name, implementation in [
        ("default on this device", {}),
        ("`foreach=True`", {"foreach": True}),
        ("`fused=True`", {"fused": True}),
    ]:
        print(f"| {name} | {adam_ms(implementation, args.adam_steps):.1f} |")

    budget, d, ff = DATA.max_tokens, MODEL.d_model, MODEL.d_ff
    print(f"\nGEMM GFLOP/s at the step's shapes ({budget} tokens)\n")
    shapes = {"QKV": (budget, d, 3 * d), "FFN in": (budget, d, ff), "FFN out": (budget, ff, d)}
    shapes["output projection"] = (budget, d, DATA.vocab_size)
    speeds_by_shape = {name: gemm_gflops(*shape) for name, shape in shapes.items()}
    layouts = list(next(iter(speeds_by_shape.values())))
    print("| shape | " + " | ".join(layouts) + " |\n|---|" + "---|" * len(layouts))
    for name, speeds in speeds_by_shape.items():
        print(
            f"| {name} {shapes[name]} | " + " | ".join(f"{v:.0f}" for v in speeds.values()) + " |"
        )


if __name__ == "__main__":
    use_fast_malloc()  # the allocator train.py runs with (experiments/allocator/)
    main()
