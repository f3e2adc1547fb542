"""Our Transformer's training and decoding speed against nn.Transformer, MarianMT, x-transformers.

Side by side in one process, on the same length-bucketed batches and the same model sizes:
training steps (forward, label-smoothed loss, backward, Adam) in target tokens per second and
as a share of the matmul peak measured in the same run, fp32 and bf16 autocast; greedy and
beam-4 decoding in sentences and output tokens per second; peak memory of training (one fresh
process per peer); optionally a profile of our training step. The peers and the batches are
experiments/common/'s; the record, with what every column means: experiments/speed/README.md.

    nice -n 10 python -m experiments.speed.benchmark --sizes small,base --precisions fp32,bf16

A peer whose package is not installed (MarianMT: transformers; x-transformers) is skipped.
"""

import argparse
import gc
import os
from importlib.metadata import version

import torch
from torch import Tensor

from experiments.common.batches import (
    decoding_batches,
    largest_batches,
    multi30k_lengths,
    target_tokens,
    training_batches,
)
from experiments.common.machine import cpu_description, load_average
from experiments.common.peers import BEAM, PACKAGES, PEERS, SIZES, Size, build, missing
from experiments.common.timing import round_order, seconds
from experiments.common.training import time_training
from experiments.speed.flops import matmul_peak, training_flops
from experiments.speed.step_profile import profile_training
from experiments.speed.tables import Tables, summarize
from experiments.speed.training_memory import measure_memory
from transformer_nmt.runtime.allocator import use_fast_malloc
from transformer_nmt.training.plan.precision import auto_cpu_precision, cpu_has_native_bf16


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="small,base", help="comma-separated: small, base")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated: fp32, bf16")
    parser.add_argument(
        "--implementations", default="ours,torch,marian,x-transformers",
        help=f"comma-separated: {', '.join(PEERS)}",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=10, help="timed fp32 training steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed fp32 steps before them")
    parser.add_argument(
        "--bf16-steps", type=int, default=1,
        help="timed bf16 steps: without native bf16 (AVX2-only CPUs) one takes minutes",
    )  # fmt: skip
    parser.add_argument(
        "--bf16-warmup", type=int, default=1 if cpu_has_native_bf16() else 0,
        help="untimed bf16 steps; default 0 where bf16 is emulated (a step's one-off costs are "
        "lost in its minutes), else 1",
    )  # fmt: skip
    parser.add_argument(
        "--seen-shapes", action="store_true",
        help="one untimed step on each timed batch first: no timed step meets a new shape, as "
        "in a long run's later epochs (oneDNN's bf16 kernels are generated per shape)",
    )  # fmt: skip
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="time training this many times, the implementations' order reversed every other "
        "round, so that a machine whose pace drifts slows each alike; the summary gives the "
        "median of the rounds' ratios and their range",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=256, help="first N test sentences")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per decoding batch")
    parser.add_argument(
        "--max-len-b", type=int, default=0,
        help="outputs stop at source length + this (EOS is never predicted, see never_eos)",
    )  # fmt: skip
    parser.add_argument("--no-decoding", action="store_true")
    parser.add_argument("--memory-steps", type=int, default=2, help="0 skips the memory table")
    parser.add_argument(
        "--profile", nargs="?", const="fp32",
        help="profile our training step in these precisions (comma-separated; alone: fp32)",
    )  # fmt: skip
    parser.add_argument("--profile-steps", type=int, default=1, help="profiled steps, after one")
    parser.add_argument("--profile-rows", type=int, default=15)
    args = parser.parse_args()
    args.sizes = args.sizes.split(",")
    args.precisions = args.precisions.split(",")
    args.implementations = args.implementations.split(",")
    args.profile = args.profile.split(",") if args.profile else []
    for values, known in (
        (args.sizes, SIZES),
        (args.precisions + args.profile, ("fp32", "bf16")),
        (args.implementations, PEERS),
    ):
        unknown = set(values) - set(known)
        if unknown:
            parser.error(f"unknown {sorted(unknown)}; choose from {list(known)}")
    return args


def training_work(size: Size, batches: list[dict]) -> tuple[int, float]:
    """Real target tokens and training FLOPs of these batches."""
    return target_tokens(batches), sum(training_flops(size, b["src"], b["tgt_in"]) for b in batches)


def warmup_and_steps(precision: str, args: argparse.Namespace) -> tuple[int, int]:
    """Untimed and timed training steps of a precision: bf16 has its own (--bf16-*)."""
    if precision == "fp32":
        return args.warmup, args.steps
    return args.bf16_warmup, args.bf16_steps


def bench_training(
    peer, size_name: str, batches: dict[str, list[dict]], args: argparse.Namespace,
    peaks: dict, tables: Tables, speeds: dict, round_: int,
) -> None:  # fmt: skip
    """Time each precision's steps after its warm-up steps, on the first batches of its own.

    Each precision pads as training does (`pad_multiple`). bf16 runs fewer steps by default
    (--bf16-steps): where it is emulated, a step takes minutes.
    """
    size = SIZES[size_name]
    params = sum(p.numel() for p in peer.model.parameters())
    for precision in args.precisions:
        warmup, steps = warmup_and_steps(precision, args)
        run = batches[precision][: warmup + steps]
        spent = time_training(peer, run, warmup, precision, args.seen_shapes)
        steps = len(run) - warmup
        tokens, flops = training_work(size, run[warmup:])
        measure = f"training {precision}, target tokens/s"
        speeds.setdefault((size_name, peer.name, measure), []).append(tokens / spent)
        tables.add("training", [
            size_name, round_ + 1, peer.name, f"{params / 1e6:.1f}M", precision, steps,
            f"{spent / steps:.2f}", f"{tokens / spent:,.0f}", f"{flops / spent / 1e9:.1f}",
            f"{flops / spent / peaks[precision]:.1%}",
        ])  # fmt: skip


def bench_decoding(
    peer, size_name: str, sources: list[Tensor], args: argparse.Namespace, tables: Tables,
    speeds: dict,
) -> None:  # fmt: skip
    peer.model.eval()
    peer.greedy(sources[0][:8], args.max_len_b)  # warm-up
    sentences = sum(len(src) for src in sources)
    for search in ("greedy", f"beam {BEAM}"):
        spent, tokens = time_decoding(peer, sources, search, args.max_len_b)
        speeds[size_name, peer.name, f"{search}, sentences/s"] = [sentences / spent]
        tables.add("decoding", [
            size_name, peer.name, search, sentences, f"{spent:.1f}",
            f"{sentences / spent:.2f}", f"{tokens / sentences:.1f}", f"{tokens / spent:,.0f}",
        ])  # fmt: skip


def time_decoding(peer, batches: list[Tensor], search: str, max_len_b: int) -> tuple[float, int]:
    """Seconds and output tokens for decoding all batches."""
    decode = peer.greedy if search == "greedy" else peer.beam
    tokens = []
    spent = seconds(lambda: tokens.extend(decode(src, max_len_b) for src in batches))
    return spent, sum(tokens)


def bench_memory(size_name: str, batches: list[dict], args: argparse.Namespace, tables: Tables):
    shapes = ", ".join("{}x{}+{}".format(*b["src"].shape, b["tgt_in"].size(1)) for b in batches)
    for name in args.implementations:
        if PEERS[name].training_only:
            continue
        rss = measure_memory(name, size_name, batches, args.threads)
        tables.add(
            "memory", [size_name, name, shapes, f"{rss['before']:.2f}", f"{rss['peak']:.2f}"]
        )


def measure_peaks(precisions: list[str]) -> dict[str, float]:
    """The matmul peak FLOP/s per precision: its fastest operand layout (bf16 is slow: smaller)."""
    peaks = {}
    for precision, dtype, n, repeats in (("fp32", torch.float32, 2048, 5),
                                         ("bf16", torch.bfloat16, 1024, 2)):  # fmt: skip
        if precision in precisions:
            layouts = matmul_peak(dtype, n, repeats)
            peaks[precision] = max(layouts.values())
            print(
                f"{precision} matmul {n}^3, GFLOP/s: "
                + ", ".join(f"{layout} {flops / 1e9:.2f}" for layout, flops in layouts.items())
                + f"; peak {peaks[precision] / 1e9:.2f}"
            )
    print(f"trainer.precision=auto trains on this CPU in {auto_cpu_precision()}")
    return peaks


def print_report(
    tables: Tables, profiles: list[tuple[str, str, str]], args: argparse.Namespace
) -> None:
    end = load_average()
    print(f"\n## Training (after warm-up steps: fp32 {args.warmup}, bf16 {args.bf16_warmup})\n")
    print(tables.markdown("training"))
    if tables.rows["decoding"]:
        print(f"\n## Decoding (batches of {args.batch_size}, max_len_b {args.max_len_b})\n")
        print(tables.markdown("decoding"))
    if tables.rows["memory"]:
        print(
            f"\n## Peak memory of fp32 training ({args.memory_steps} steps on the batches with "
            "the most padded positions, one fresh process each)\n"
        )
        print(tables.markdown("memory"))
    if tables.rows["summary"]:
        print("\n## Ours against the fastest reference\n")
        print(tables.markdown("summary"))
    for size_name, precision, table in profiles:
        print(f"\n## Profile: our {size_name} {precision} training step, by self CPU time")
        print(f"\n{table}")
    print(f"\nMeasurements done with a {end}")


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    for name in list(args.implementations):
        if package := missing(name):
            print(
                f"{package} is not installed: skipping the {name} column "
                f"(`pip install {package}` into this environment, for the benchmark only)\n"
            )
            args.implementations.remove(name)

    if "bf16" in args.precisions and not cpu_has_native_bf16():
        print("bf16 rows skipped: this CPU has no native bf16 matmuls (bf16 is emulated)\n")
        args.precisions.remove("bf16")
    src_lengths, tgt_lengths, test_lengths = multi30k_lengths()
    print(
        f"CPU: {cpu_description()}; {args.threads} thread(s); torch {torch.__version__}"
        + "".join(
            f", {PACKAGES[n]} {version(PACKAGES[n])}" for n in args.implementations if n in PACKAGES
        )  # fmt: skip
        + f"; GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')}; {load_average()}"
    )
    peaks = measure_peaks(args.precisions)
    tables, speeds, profiles = Tables(), {}, []
    for size_name in args.sizes:
        size = SIZES[size_name]
        count = max(2, *(sum(warmup_and_steps(p, args)) for p in ("fp32", "bf16")))
        precisions = sorted(set(args.precisions + args.profile))
        batches = {
            precision: training_batches(src_lengths, tgt_lengths, size.vocab, count, precision)
            for precision in precisions
        }
        for precision in precisions:
            warmup, steps = warmup_and_steps(precision, args)
            timed = batches[precision][warmup : warmup + steps]
            tokens, flops = training_work(size, timed)
            padded = sum(b["tgt_out"].numel() for b in timed)
            print(
                f"{size_name}: {precision} batches of {tokens / len(timed):.0f} target tokens on "
                f"average ({padded / len(timed):.0f} with padding), "
                f"{flops / tokens / 1e6:.1f} MFLOP per target token per training step"
            )
        sources = decoding_batches(test_lengths, size.vocab, args.sentences, args.batch_size)
        peers = {name: build(name, size) for name in args.implementations}
        for round_ in range(args.rounds):
            for name in round_order(args.implementations, round_):
                bench_training(peers[name], size_name, batches, args, peaks, tables, speeds, round_)
        for name, peer in peers.items():
            for precision in args.profile if name == "ours" else []:
                steps = batches[precision][: args.profile_steps + 1]
                table = profile_training(peer, steps, precision, args.profile_rows)
                profiles.append((size_name, precision, table))
            if not args.no_decoding and not peer.training_only:
                bench_decoding(peer, size_name, sources, args, tables, speeds)
        peers = peer = None  # free this size's models before the next size's
        gc.collect()
        if args.memory_steps:
            epoch = training_batches(src_lengths, tgt_lengths, size.vocab)
            bench_memory(size_name, largest_batches(epoch, args.memory_steps), args, tables)
    summarize(speeds, tables)
    print_report(tables, profiles, args)


if __name__ == "__main__":
    use_fast_malloc()  # the allocator train.py runs with (experiments/allocator/)
    main()
