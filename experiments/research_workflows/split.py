"""Multi30k split as the back-translation literature simulates it, for the workflows record.

    python -m experiments.research_workflows.split --data ../shared/data/multi30k --out w71

Writes, from the 29,000 training pairs in order: half/ (pairs 1-14,500, the parallel data),
mono.en.gz (the English of pairs 14,501-29,000, the monolingual text) and ft/ (pairs
14,501-19,500 in both languages: data held apart from the half-data model, to fine-tune on). Both
folders link Multi30k's val and test.
"""

import argparse
import gzip
from pathlib import Path

SPLITS = ("val", "test_2016_flickr")
LANGS = ("de", "en")


def read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def write(path: Path, lines: list[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{line}\n" for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of Multi30k's .gz files")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--fine-tune-pairs", type=int, default=5000)
    args = parser.parse_args()
    train = {lang: read(args.data / f"train.{lang}.gz") for lang in LANGS}
    half = len(train["en"]) // 2
    folders = {"half": slice(0, half), "ft": slice(half, half + args.fine_tune_pairs)}
    for name, pairs in folders.items():
        folder = args.out / name
        folder.mkdir(parents=True, exist_ok=True)
        for lang in LANGS:
            write(folder / f"train.{lang}.gz", train[lang][pairs])
            for split in SPLITS:
                link = folder / f"{split}.{lang}.gz"
                link.unlink(missing_ok=True)
                link.symlink_to((args.data / f"{split}.{lang}.gz").resolve())
    write(args.out / "mono.en.gz", train["en"][half:])
    print(f"{args.out}: half/ {half:,} pairs, mono.en.gz {len(train['en']) - half:,} lines, ft/")


if __name__ == "__main__":
    main()
