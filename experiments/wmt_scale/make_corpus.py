"""Write a WMT14-sized German-English corpus built from the shared Multi30k text.

Each pair joins 1 + Poisson(1) Multi30k pairs drawn at random, both sides in the same order, so
the pairs stay translations of each other: about 24 words a side on average with a
tail past 80, close to WMT14 en-de's shape (Multi30k alone averages 12). Sizes default to WMT14's:
4.5M training pairs, 3000 validation (newstest2013), 3003 test (newstest2014). The text is only
Multi30k's, so BPE learns a far smaller vocabulary than on real WMT14 (see README.md).

Usage: python experiments/wmt_scale/make_corpus.py --out /tmp/wmt_scale [--pairs 4500000]
Then:  python train.py data=multi30k data.corpus.path=/tmp/wmt_scale \
         data.corpus.splits={train:train,val:val,test:test} data.src_lang=en data.tgt_lang=de ...
"""

import argparse
import random
import sys
from pathlib import Path

import numpy as np

from transformer_nmt.data.bitext import TextCorpus

ROOT = Path(__file__).resolve().parents[2]

MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
SPLITS = {"train": None, "val": 3000, "test": 3003}  # None: --pairs


def write_split(out: Path, split: str, pairs: list[tuple[str, str]], count: int, seed: int) -> None:
    """Write `count` joined pairs to `<split>.en` and `<split>.de`."""
    rng = random.Random(seed)
    joined = np.random.default_rng(seed).poisson(1.0, size=count) + 1
    with open(out / f"{split}.en", "w") as en, open(out / f"{split}.de", "w") as de:
        for k in joined:
            chosen = rng.choices(pairs, k=int(k))
            en.write(" ".join(p[0] for p in chosen) + "\n")
            de.write(" ".join(p[1] for p in chosen) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=4_500_000, help="training pairs")
    parser.add_argument("--multi30k", type=Path, default=MULTI30K)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = TextCorpus(
        str(args.multi30k), {"train": "train", "val": "val", "test": "test_2016_flickr"}
    )
    # Held-out splits are built from Multi30k's own held-out text, so no test sentence is trained.
    for offset, (split, count) in enumerate(SPLITS.items()):
        pairs = corpus.read(split, "en", "de")
        write_split(args.out, split, pairs, count or args.pairs, args.seed + offset)
        print(f"{split}: {count or args.pairs} pairs written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
