"""Our engine under two source trees (two commits), timed in turn on the same sentences.

    git worktree add /tmp/before COMMIT
    python -m experiments.frontier.ab CKPT --src test.de.gz --before /tmp/before --after . \
        --beam-size 4 --rounds 3

Each tree runs in its own worker process (`PYTHONPATH=TREE/src`), which loads the checkpoint,
translates all sources once untimed and then waits; the parent has the two translate the same
chunk of --chunk sentences one after the other, never at once, the order alternating chunk by
chunk. This VM's speed drifts by up to ~40 % within minutes (experiments/frontier/README.md), so
each ratio compares passes a few seconds apart; the median over chunks and rounds is the result.
The first round's outputs are compared line by line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from experiments.common.machine import cpu_name, load_average
from experiments.frontier import timing


def worker(args: argparse.Namespace) -> None:
    """Translate the chunks the parent names on stdin; answer each with its time and outputs."""
    import torch

    from transformer_nmt import Translator
    from transformer_nmt.data.bitext import read_lines

    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in read_lines(args.src)]
    translator = Translator.from_checkpoint(args.checkpoint)
    options = timing.search(args)
    translator.translate(sources, **options)  # one-off costs: thread pools, allocator growth
    print(json.dumps({"ready": len(sources)}), flush=True)
    for line in sys.stdin:
        start, end = json.loads(line)
        began = time.perf_counter()
        outputs = translator.translate(sources[start:end], **options)
        print(json.dumps({"s": time.perf_counter() - began, "out": outputs}), flush=True)


def main() -> None:
    parser = timing.parser(__doc__, beam_size=4)
    parser.add_argument("--before", type=Path, help="the tree timed first in even chunks")
    parser.add_argument("--after", type=Path)
    parser.add_argument("--chunk", type=int, default=250, help="sentences a timed pass")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.before is None or args.after is None:
        parser.error("--before and --after name the two trees")
    command = [sys.executable, "-m", "experiments.frontier.ab", "--worker", *sys.argv[1:]]
    workers = []
    for tree in (args.before, args.after):
        # The experiments package from here; transformer_nmt from the tree.
        path = os.pathsep.join([str(tree.resolve() / "src"), str(Path.cwd())])
        env = dict(os.environ, PYTHONPATH=path)
        pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        workers.append(subprocess.Popen(command, env=env, **pipes))
    total = [json.loads(w.stdout.readline())["ready"] for w in workers][0]

    def timed(w: subprocess.Popen, start: int, end: int) -> dict:
        w.stdin.write(json.dumps([start, end]) + "\n")
        w.stdin.flush()
        return json.loads(w.stdout.readline())

    print(f"CPU {cpu_name()}; {args.threads} thread(s); {load_average()}")
    ratios, same = [], 0
    for round_ in range(args.rounds):
        for i, start in enumerate(range(0, total, args.chunk)):
            end = min(start + args.chunk, total)
            order = (0, 1) if (round_ + i) % 2 == 0 else (1, 0)
            results = {k: timed(workers[k], start, end) for k in order}
            ratios.append(results[0]["s"] / results[1]["s"])  # after's speed over before's
            if round_ == 0:
                pairs = zip(results[0]["out"], results[1]["out"], strict=True)
                same += sum(a == b for a, b in pairs)
        print(f"round {round_ + 1}: median so far {statistics.median(ratios):.3f}", flush=True)
    for w in workers:
        w.stdin.close()
        w.wait()
    ratios.sort()
    quartiles = ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]
    print(
        f"after / before, beam {args.beam_size}: median {statistics.median(ratios):.3f} "
        f"(quartiles {quartiles[0]:.3f}-{quartiles[1]:.3f}, {len(ratios)} chunks); "
        f"{same} of {total} outputs the same"
    )


if __name__ == "__main__":
    main()
