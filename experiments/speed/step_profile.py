"""Which operators a training step spends its CPU time in, from torch's profiler."""

import time

import torch

from experiments.common.training import make_optimizer, train_step


def profile_training(impl, batches: list[dict], precision: str, rows: int) -> str:
    """A markdown table of the operators with the most self CPU time in training steps.

    The first batch is an untimed step, so that Adam's state exists before profiling.
    """
    impl.model.train()
    optimizer = make_optimizer(impl.model)
    first, *profiled = batches
    train_step(impl, optimizer, first, precision)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for batch in profiled:
            train_step(impl, optimizer, batch, precision)
        seconds = time.perf_counter() - start
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    lines = [
        f"{len(profiled)} step(s), {seconds:.2f} s wall time under the profiler, "
        f"{total / 1e6:.2f} s self CPU time in operators",
        "",
        "| operator | calls | self CPU s | share |",
        "|---|---|---|---|",
    ]
    for e in events[:rows]:
        lines.append(
            f"| `{e.key}` | {e.count} | {e.self_cpu_time_total / 1e6:.3f} "
            f"| {e.self_cpu_time_total / total:.1%} |"
        )
    rest = sum(e.self_cpu_time_total for e in events[rows:])
    lines.append(f"| (all other operators) | | {rest / 1e6:.3f} | {rest / total:.1%} |")
    return "\n".join(lines)
