"""How steady `precision=auto`'s CPU timing is on a busy machine (training/plan/precision.py).

Starts `--load` processes that spin and sleep in random bursts of 20-300 ms, as other jobs on a
shared machine do, then runs the bf16/fp32 matmul probe `--probes` times and prints its readings
and how many of them would train in bf16:

    python experiments/speed/precision_probe.py --load 3 --probes 15
"""

import argparse
import multiprocessing
import random
import statistics
import time

from transformer_nmt.training.plan.precision import BF16_MIN_MATMUL_SPEEDUP, cpu_bf16_matmul_speedup


def bursts(seed: int) -> None:
    rng = random.Random(seed)
    while True:
        busy_until = time.perf_counter() + rng.uniform(0.02, 0.3)
        while time.perf_counter() < busy_until:
            pass
        time.sleep(rng.uniform(0.02, 0.3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, default=3, help="bursty processes beside the probe")
    parser.add_argument("--probes", type=int, default=15)
    args = parser.parse_args()
    load = [
        multiprocessing.Process(target=bursts, args=(i,), daemon=True) for i in range(args.load)
    ]
    for process in load:
        process.start()
    try:
        readings = sorted(cpu_bf16_matmul_speedup() for _ in range(args.probes))
    finally:
        for process in load:
            process.terminate()
    print(f"{args.probes} probes beside {args.load} bursty processes, bf16/fp32 speedup:")
    print(" ".join(f"{r:.2f}" for r in readings))
    print(
        f"min {readings[0]:.2f}, median {statistics.median(readings):.2f}, max {readings[-1]:.2f}; "
        f"{sum(r >= BF16_MIN_MATMUL_SPEEDUP for r in readings)} would train in bf16 "
        f"(needs {BF16_MIN_MATMUL_SPEEDUP}x)"
    )


if __name__ == "__main__":
    main()
