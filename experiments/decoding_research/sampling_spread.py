"""Sampling speed against transformers' `generate`, with its spread across batch sizes and repeats.

    python -m experiments.decoding_research.sampling_spread CKPT --src val.de.gz --threads 1 \
        --batch-sizes 8 16 32 64 128 --repeats 5

One number at one batch size hid how much the ratio moves (one earlier rerun gave 0.96x at 128
sentences and 1.50x at 256): here, for each batch size, ours (`Translator`, what
`nmt-translate --sample 4` runs) and `generate(do_sample=True)` on the `nmt-export hf` folder of
the same checkpoint draw 4 samples a sentence from the full distribution at temperature 1, in the
same length-sorted batches, alternating within each repeat after an untimed pass of each; every
repeat's ratio is kept, and the table gives each batch size's fastest, median and slowest ratio
and both runs' output tokens (different lengths are different work).
"""

import argparse
import json
import statistics
from pathlib import Path

import torch

from experiments.common.machine import cpu_description, load_average
from experiments.common.timing import interleaved_seconds
from experiments.decoding_research.speed import (
    MAX_LEN_B,
    SAMPLES,
    hf_sampler,
    kept,
    length_sorted_batches,
    output_tokens,
)
from transformer_nmt import Sampling, Translator
from transformer_nmt.data.bitext import read_lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--sentences", type=int, help="the first N lines (default: all)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources = [line.strip() for line in read_lines(args.src)][: args.sentences]
    ours = Translator.from_checkpoint(args.checkpoint, device="cpu")
    print(f"CPU {cpu_description()}; {args.threads} thread(s); {load_average()}", flush=True)
    result: dict = {"sentences": len(sources), "threads": args.threads, "batch_sizes": {}}
    for batch_size in args.batch_sizes:
        batches = length_sorted_batches(sources, ours.tokenizer, batch_size)
        outputs: dict[str, list] = {}
        runs = {
            "ours": lambda b=batch_size: ours.translate(
                sources, sampling=Sampling(n=SAMPLES, seed=0), batch_size=b, max_len_b=MAX_LEN_B
            ),
            "generate": hf_sampler(args.checkpoint, batches),
        }
        times = interleaved_seconds(
            {name: kept(outputs, name, run) for name, run in runs.items()}, args.repeats
        )
        ratios = sorted(g / o for g, o in zip(times["generate"], times["ours"], strict=True))
        tokens = {name: output_tokens(ours.tokenizer, out) for name, out in outputs.items()}
        row = {
            "seconds": times,
            "ratio generate/ours": {
                "fastest": ratios[-1],
                "median": statistics.median(ratios),
                "slowest": ratios[0],
            },
            "output_tokens": tokens,
            "load_average": load_average(),
        }
        result["batch_sizes"][batch_size] = row
        print(batch_size, json.dumps(row["ratio generate/ours"]), tokens, flush=True)
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
