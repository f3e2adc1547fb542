"""Seconds a sentence of each setting of `quality.py`, timed together so that load hits all alike.

    python -m experiments.mbr.seconds A.ckpt --src ../shared/data/multi30k/val.de.gz \
        --sentences 50 --threads 1 --repeats 2

`quality.py` times each setting in its own process, as a user runs it, so a busy machine slows
some settings more than others. Here every setting translates the same first --sentences of
--src in one process, the settings alternating within each repeat after an untimed pass
(`experiments.common.timing`); each setting's options are parsed by nmt-translate's own argument
code, so they mean what they mean there. Reported: the median seconds a sentence and the ratio to
beam 4's.
"""

import argparse
import json
import statistics
from functools import partial
from pathlib import Path

import torch

from experiments.common.machine import cpu_description, load_average
from experiments.common.timing import interleaved_seconds
from experiments.mbr.quality import BASELINE, settings
from transformer_nmt import Translator
from transformer_nmt.cli import sampling_args
from transformer_nmt.cli.search_args import add_search_arguments, search_options
from transformer_nmt.data.bitext import read_lines


def translation_options(options: list[str], seed: int) -> dict:
    """`Translator.translate`'s arguments for nmt-translate's options."""
    parser = argparse.ArgumentParser()
    sampling_args.add_sampling_arguments(parser)
    add_search_arguments(parser)
    args = parser.parse_args([*options, "--seed", str(seed)])
    return search_options(args) | {"mbr": sampling_args.mbr(args)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="de→en checkpoint")
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--sentences", type=int, default=50, help="the first N lines")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--n", type=int, nargs="+", default=[16, 32], help="candidates")
    parser.add_argument("--epsilon", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    translator = Translator.from_checkpoint(args.model)
    sources = read_lines(args.src)[: args.sentences]
    chosen = {
        name: translation_options(options, args.seed)
        for name, options in settings(args.n, args.epsilon).items()
    }
    runs = {name: partial(translator.translate, sources, **kw) for name, kw in chosen.items()}
    print(load_average(), flush=True)
    times = interleaved_seconds(runs, args.repeats)
    base = statistics.median(times[BASELINE])
    results = {
        name: {
            "s_per_sentence": statistics.median(t) / len(sources),
            "x_beam_4": statistics.median(t) / base,
            "repeats": t,
        }
        for name, t in times.items()
    }
    print(
        f"{cpu_description()}; {args.threads} thread(s); {len(sources)} sentences; {load_average()}"
    )
    print("| setting | seconds a sentence | x beam 4 |\n|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['s_per_sentence']:.4f} | {r['x_beam_4']:.1f} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
