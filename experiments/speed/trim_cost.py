"""What one `malloc_trim(0)` costs a training step under train.py's allocator setting.

Cycles of two model=small fp32 training steps, a trim, one more step: prints the median normal
step, the median step right after a trim (it faults back the pages it needs), the trim itself
and what each trim released. Runs under train.py's GLIBC_TUNABLES unless you set your own:

    OMP_NUM_THREADS=1 python -m experiments.speed.trim_cost
"""

import itertools
import os
import statistics
import sys

from experiments.common.batches import bucketed_batches
from experiments.common.peers import SIZES, build
from experiments.common.timing import seconds
from experiments.common.training import make_optimizer, train_step
from transformer_nmt.runtime.allocator import use_fast_malloc
from transformer_nmt.training.callbacks.batch_telemetry import rss_gb
from transformer_nmt.training.callbacks.malloc_trim import load_malloc_trim


def main(cycles: int = 4) -> None:
    malloc_trim = load_malloc_trim()
    if malloc_trim is None:
        sys.exit("no glibc malloc_trim here: nothing to measure")
    peer = build("ours", SIZES["small"])
    optimizer = make_optimizer(peer.model.train())
    batches = itertools.cycle(bucketed_batches(6, 2048, SIZES["small"].vocab, seed=1))

    def step() -> None:
        train_step(peer, optimizer, next(batches), "fp32")

    for _ in range(6):
        step()  # every batch shape seen once: the heap at its working size
    normal, after, trims, freed = [], [], [], []
    for _ in range(cycles):
        normal += [seconds(step), seconds(step)]
        before = rss_gb()
        trims.append(seconds(lambda: malloc_trim(0)))
        freed.append(before - rss_gb())
        after.append(seconds(step))
    print(f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')}")
    step_s, after_s = statistics.median(normal), statistics.median(after)
    print(f"step {step_s:.3f} s, step after a trim {after_s:.3f} s")
    print(
        f"trim {statistics.median(trims) * 1e3:.0f} ms, released GiB {[round(f, 2) for f in freed]}"
    )


if __name__ == "__main__":
    use_fast_malloc()
    main()
