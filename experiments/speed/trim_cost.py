"""What one `malloc_trim(0)` costs a training step under train.py's allocator setting (issue 20).

Cycles of two model=small fp32 training steps, a trim, one more step: prints the median normal
step, the median step right after a trim (it faults back the pages it needs), the trim itself
and what each trim released. Run under train.py's GLIBC_TUNABLES, as training runs:

    GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
        OMP_NUM_THREADS=1 python experiments/speed/trim_cost.py
"""

import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_kernels import random_batches, step_runs  # noqa: E402

from transformer_nmt.training.callbacks.batch_telemetry import rss_gb  # noqa: E402
from transformer_nmt.training.callbacks.malloc_trim import load_malloc_trim  # noqa: E402


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main(cycles: int = 4) -> None:
    malloc_trim = load_malloc_trim()
    if malloc_trim is None:
        sys.exit("no glibc malloc_trim here: nothing to measure")
    step = step_runs(random_batches(6, 2048, seed=1), torch.float32)["fused"]
    for _ in range(6):
        step()  # every batch shape seen once: the heap at its working size
    normal, after, trims, freed = [], [], [], []
    for _ in range(cycles):
        normal += [timed(step), timed(step)]
        before = rss_gb()
        trims.append(timed(lambda: malloc_trim(0)))
        freed.append(before - rss_gb())
        after.append(timed(step))
    print(f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')}")
    step_s, after_s = statistics.median(normal), statistics.median(after)
    print(f"step {step_s:.3f} s, step after a trim {after_s:.3f} s")
    print(
        f"trim {statistics.median(trims) * 1e3:.0f} ms, released GiB {[round(f, 2) for f in freed]}"
    )


if __name__ == "__main__":
    main()
