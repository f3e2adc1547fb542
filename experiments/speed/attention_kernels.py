"""Attention kernels side by side: which one `model.attention_kernel=auto` should pick.

Times one MultiHeadAttention layer (projections included) with each kernel, training (forward
and backward) and inference (forward under no_grad), for the shapes of model=small and
model=base at Multi30k lengths; then whole training steps of model=small. The kernels alternate
within each repeat and every number is a median, so that load on the machine hits them alike.
fp32 always; bf16 (autocast) only where the CPU has native bf16 matmuls, since emulated bf16 is
far slower and its timings say nothing about real ones. The record: experiments/speed/README.md.

    OMP_NUM_THREADS=2 nice -n 10 python -m experiments.speed.attention_kernels
"""

import argparse
import contextlib
import statistics
from collections.abc import Callable

import torch

from experiments.common.batches import bucketed_batches
from experiments.common.machine import cpu_description, load_average
from experiments.common.timing import interleaved
from experiments.common.training import make_optimizer
from transformer_nmt.cli.compose import compose_group
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID
from transformer_nmt.model import Transformer
from transformer_nmt.model.masks import padding_mask
from transformer_nmt.model.transformer.attention import MultiHeadAttention, attention_kernel
from transformer_nmt.training.plan.precision import cpu_has_native_bf16
from transformer_nmt.training.step.loss import label_smoothed_nll

KERNELS = ("fused", "math", "explicit")
VOCAB = 8000


def preset_shape(name: str) -> dict[str, int]:
    """The `model=<name>` preset's shape, as training composes it (conf/model/)."""
    model = compose_group("model", name)
    return {key: model[key] for key in ("N", "d_model", "d_ff", "h")}


SIZES = {name: preset_shape(name) for name in ("small", "base")}


def autocast(dtype: torch.dtype):
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype)


def layer_runs(
    size: dict, batch: int, length: int, case: str, dtype: torch.dtype, grad: bool
) -> dict[str, Callable[[], None]]:
    """One attention layer's call per kernel: encoder self-attention over padded sources,
    causal decoder self-attention, or one incremental decoding step over a cache of `length`."""
    torch.manual_seed(0)
    d_model, h = size["d_model"], size["h"]
    mha = MultiHeadAttention(d_model, h, d_model // h, d_model // h)
    x = torch.randn(batch, 1 if case == "decode step" else length, d_model, requires_grad=grad)
    lengths = torch.randint(length // 2, length + 1, (batch,))
    ids = torch.where(torch.arange(length) < lengths[:, None], EOS_ID, PAD_ID)  # words or padding
    mask = padding_mask(ids, PAD_ID) if case == "encoder self" else None
    cache = {}
    if case == "decode step":
        with torch.no_grad():
            mha(torch.randn(batch, length, d_model), causal=True, cache=cache)

    def run(kernel: str) -> Callable[[], None]:
        def call() -> None:
            mha.kernel = kernel
            step_cache = dict(cache) if cache else None  # each step appends to its own copy
            with torch.set_grad_enabled(grad), autocast(dtype):
                out, _ = mha(x, mask=mask, causal=case == "decoder self", cache=step_cache)
            if grad:
                out.float().sum().backward()

        return call

    return {kernel: run(kernel) for kernel in KERNELS}


def set_kernel(model: Transformer, kernel: str) -> None:
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.kernel = kernel


def step_runs(batches: list[dict], dtype: torch.dtype) -> dict[str, Callable[[], None]]:
    """One training step per kernel of model=small: forward, loss, backward, Adam."""
    torch.manual_seed(0)
    model = Transformer(VOCAB, PAD_ID, **SIZES["small"]).train()
    optimizer = make_optimizer(model)
    position = iter(range(10**9))

    def run(kernel: str) -> Callable[[], None]:
        def step() -> None:
            set_kernel(model, kernel)
            batch = batches[next(position) % len(batches)]
            index = batch["tgt_index"]  # only real target positions, as TranslationModule
            with autocast(dtype):
                logits = model(batch["src"], batch["tgt_in"], index)
            target = batch["tgt_out"].flatten().index_select(0, index)
            loss, _ = label_smoothed_nll(logits, target, 0.1)
            (loss / index.numel()).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return step

    return {kernel: run(kernel) for kernel in KERNELS}


def row(cells: list[str], times: dict[str, float], unit: Callable[[float], str]) -> str:
    """A table row: the cells, each kernel's time in `unit`, the fastest, fused time / fastest."""
    best = min(times, key=times.get)
    ratio = times["fused"] / times[best]
    return (
        "| "
        + " | ".join([*cells, *(unit(times[k]) for k in KERNELS), best, f"{ratio:.2f}x"])
        + " |"
    )


def layer_table(sizes: list[str], dtypes: list[torch.dtype], args: argparse.Namespace) -> None:
    print("\nOne attention layer, ms a call; best; fused / best\n")
    print(f"| size | dtype | attention | direction | T | B | {' | '.join(KERNELS)} | best | gain |")
    print("|---" * (8 + len(KERNELS)) + "|")
    for size_name in sizes:
        for dtype in dtypes:
            for length in map(int, args.lengths.split(",")):
                batch = args.tokens // length
                for case in ("encoder self", "decoder self", "decode step"):
                    for grad in (True, False) if case != "decode step" else (False,):
                        runs = layer_runs(SIZES[size_name], batch, length, case, dtype, grad)
                        times = interleaved(runs, args.repeats, args.calls)
                        direction = "training" if grad else "inference"
                        cells = [size_name, str(dtype)[6:], case, direction, str(length)]
                        print(
                            row([*cells, str(batch)], times, lambda s: f"{s * 1e3:.2f}"), flush=True
                        )


def step_table(dtypes: list[torch.dtype], args: argparse.Namespace) -> None:
    print("\nmodel=small training steps, target tokens/s; best; best / fused\n")
    print(f"| dtype | {' | '.join(KERNELS)} | best | gain |")
    print("|---" * (3 + len(KERNELS)) + "|")
    batches = bucketed_batches(args.steps, args.tokens, VOCAB)
    tokens = statistics.mean(b["tgt_index"].numel() for b in batches)
    for dtype in dtypes:
        times = interleaved(step_runs(batches, dtype), args.repeats, args.steps)
        print(row([str(dtype)[6:]], times, lambda s: f"{tokens / s:,.0f}"), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="small,base", help="of the layer rows; empty: none")
    parser.add_argument("--lengths", default="13,30", help="sentence lengths in tokens")
    parser.add_argument("--tokens", type=int, default=3072, help="tokens a batch")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3, help="layer calls a timing")
    parser.add_argument("--steps", type=int, default=3, help="training steps a timing; 0: none")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_description()}")
    print(f"torch {torch.__version__}, {args.threads} threads, {load_average()}")
    dtypes = [torch.float32]
    if cpu_has_native_bf16():
        dtypes.append(torch.bfloat16)
    else:
        print("bf16 rows skipped: this CPU has no native bf16 matmuls (bf16 is emulated)")
    sizes = [size for size in args.sizes.split(",") if size]
    if sizes:
        layer_table(sizes, dtypes, args)
    if args.steps:
        step_table(dtypes, args)
    for dtype in dtypes:
        auto = {grad: attention_kernel("cpu", dtype, grad) for grad in (True, False)}
        print(f"\nauto picks on CPU {dtype}: training {auto[True]}, inference {auto[False]}")
    print(f"at the end: {load_average()}")


if __name__ == "__main__":
    main()
