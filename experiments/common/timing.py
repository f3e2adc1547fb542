"""Wall-clock timing for the benchmarks: the device's queued work included, medians of repeats."""

import functools
import statistics
from collections.abc import Callable
from time import perf_counter

import torch


def synchronize(device: torch.device | str) -> None:
    """Wait for the work queued on `device`: CUDA runs asynchronously, the CPU does not."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds(run: Callable[[], object], device: torch.device | str = "cpu") -> float:
    """Wall seconds of one call of `run`, the device work it queued included."""
    synchronize(device)  # work queued before is not this call's
    start = perf_counter()
    run()
    synchronize(device)
    return perf_counter() - start


def median_seconds(
    run: Callable[[], object], repeats: int, warmup: int = 1, device: torch.device | str = "cpu"
) -> float:
    """Median wall seconds of `repeats` calls, after `warmup` untimed ones (first-call costs)."""
    for _ in range(warmup):
        run()
    return statistics.median(seconds(run, device) for _ in range(repeats))


def interleaved(
    runs: dict[str, Callable[[], object]],
    repeats: int,
    calls: int = 1,
    device: torch.device | str = "cpu",
) -> dict[str, float]:
    """Median seconds per call of each run, the runs alternating within every repeat
    (`interleaved_seconds`)."""
    times = interleaved_seconds(runs, repeats, calls, device)
    return {name: statistics.median(t) for name, t in times.items()}


def interleaved_seconds(
    runs: dict[str, Callable[[], object]],
    repeats: int,
    calls: int = 1,
    device: torch.device | str = "cpu",
) -> dict[str, list[float]]:
    """Seconds per call of each run in every repeat, the runs alternating within each.

    Alternating, so that load on the machine or a drifting clock speed hits every run alike;
    one untimed call of each first.
    """
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(seconds(functools.partial(repeat, run, calls), device) / calls)
    return times


def repeat(run: Callable[[], object], calls: int) -> None:
    for _ in range(calls):
        run()


def round_order(names: list[str], round_: int) -> list[str]:
    """The order to run `names` in a round: reversed every other round, so drift hits each alike."""
    return names[::-1] if round_ % 2 else list(names)
