"""What MBR's N x N utilities cost next to drawing its N samples, at N = 16, 32 and 64.

    python -m experiments.decoding_research.mbr_cost CKPT --src val.de.gz --sentences 100 \
        --threads 1 --utility chrf

For each N, on one CPU in one process: the seconds to draw N epsilon samples a sentence
(`Translator.translate(sampling=...)`, as `--mbr N` draws its pseudo-references) and the seconds
to rank those samples against themselves (`decoding.mbr.select`, the batched utilities of
`evaluation.utility`), each the median of --repeats passes after an untimed one. The share is
utilities / (sampling + utilities): what MBR adds to sampling, its candidates being the samples.
"""

import argparse
import statistics
from pathlib import Path
from time import perf_counter

import torch

from experiments.common.machine import cpu_description, load_average
from transformer_nmt import Sampling, Translator
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.decoding.mbr import select
from transformer_nmt.evaluation.utility import UTILITIES

SIZES = (16, 32, 64)
EPSILON = 0.02  # Freitag et al., 2023's epsilon samples


def median_seconds(run, repeats: int) -> float:
    run()  # first-call costs are not the steady state's
    times = []
    for _ in range(repeats):
        start = perf_counter()
        run()
        times.append(perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--src", type=Path, required=True, help="source text, .gz allowed")
    parser.add_argument("--sentences", type=int, default=100, help="the first lines of --src")
    parser.add_argument("--utility", choices=UTILITIES, default="chrf")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-len-b", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in read_lines(args.src)][: args.sentences]
    translator = Translator.from_checkpoint(args.checkpoint, device="cpu")
    print(f"CPU: {cpu_description()}; torch threads: {args.threads}; {load_average()}")
    print(f"{len(sources)} sentences, utility {args.utility}, epsilon {EPSILON}")
    print("| N | sampling s | utilities s | utilities share | mean sample chars |")
    print("|---|---|---|---|---|")
    for n in SIZES:
        sampling = Sampling(n=n, epsilon=EPSILON, seed=1)
        options = dict(sampling=sampling, batch_size=args.batch_size, max_len_b=args.max_len_b)
        drawn = translator.translate(sources, **options)
        texts = [[text for text, _ in samples] for samples in drawn]

        def rank(texts=texts) -> None:
            for samples in texts:
                select(list(dict.fromkeys(samples)), samples, args.utility)

        sample_s = median_seconds(
            lambda options=options: translator.translate(sources, **options), args.repeats
        )
        utility_s = median_seconds(rank, args.repeats)
        chars = statistics.mean(len(t) for samples in texts for t in samples)
        share = utility_s / (sample_s + utility_s)
        print(f"| {n} | {sample_s:.2f} | {utility_s:.2f} | {100 * share:.1f}% | {chars:.0f} |")


if __name__ == "__main__":
    main()
