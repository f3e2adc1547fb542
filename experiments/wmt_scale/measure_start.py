"""The second start of `python train.py model=base` on a prepared corpus: seconds to the first
training batch and the process's peak RSS after its first batches, against a 1k-pair corpus.

Both runs use data=wmt14_en_de's settings on local text (37k BPE, max_len 256, batches of 3125
tokens, 2 loader workers), the Adam state of model=base, and stop after `--batches` batches
(first_steps.py). Run the big corpus's preparation first (measure_data.py or one train.py run),
so that this start finds its tokenizer and token stores.

Usage: python experiments/wmt_scale/measure_start.py --corpus /tmp/wmt_scale --cache /tmp/cache
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def start(corpus: Path, cache: Path, batches: int, workdir: Path) -> dict:
    """One train.py run to its first `batches` batches; first_steps.py's report."""
    out = workdir / "first_steps.json"
    command = [
        sys.executable,
        str(ROOT / "train.py"),
        "data=multi30k",
        f"data.corpus.path={corpus}",
        "data.corpus.splits={train:train,val:val,test:test}",
        "data.src_lang=en",
        "data.tgt_lang=de",
        "data.vocab_size=37000",
        "data.max_tokens=3125",
        "data.max_len=256",
        "data.pad_to_multiple_of=8",
        "data.num_workers=2",
        f"paths.cache_dir={cache}",
        "model=base",
        "trainer=cpu",
        "logger=none",
        "+trainer.num_sanity_val_steps=0",
        "+trainer.limit_val_batches=0",  # stopped before any validation: none needed
        "+callbacks.first_steps._target_=experiments.wmt_scale.first_steps.FirstSteps",
        f"+callbacks.first_steps.out={out}",
        f"+callbacks.first_steps.batches={batches}",
        f"hydra.run.dir={workdir / 'run'}",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def small_copy(corpus: Path, out: Path, pairs: int) -> Path:
    """The first `pairs` train pairs and the same val and test files."""
    out.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        with open(corpus / f"train.{lang}") as src, open(out / f"train.{lang}", "w") as dst:
            dst.writelines(line for _, line in zip(range(pairs), src, strict=False))
        for split in ("val", "test"):
            (out / f"{split}.{lang}").write_bytes((corpus / f"{split}.{lang}").read_bytes())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        small = small_copy(args.corpus, tmp / "small", 1000)
        (tmp / "small_run").mkdir()
        # The small corpus prepares itself in its own cache first; its second start is measured.
        start(small, tmp / "small_cache", 1, tmp / "small_run")
        baseline = start(small, tmp / "small_cache", args.batches, tmp / "small_run")
        (tmp / "big_run").mkdir()
        big = start(args.corpus, args.cache, args.batches, tmp / "big_run")
    print(f"| corpus | seconds to the first batch | first {args.batches} batches (s) | peak RSS |")
    print("|---|---|---|---|")
    for name, report in ((str(args.corpus), big), ("its first 1000 pairs", baseline)):
        print(
            f"| {name} | {report['seconds_to_first_batch']} | "
            f"{report['seconds_of_first_batches']} | {report['peak_rss_mb']} MB |"
        )
    print(f"RSS above the 1k-pair corpus: {big['peak_rss_mb'] - baseline['peak_rss_mb']} MB")


if __name__ == "__main__":
    main()
