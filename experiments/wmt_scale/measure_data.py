"""The data side at scale: first preparation, second start, and the memory of two ranks.

On a corpus written by make_corpus.py, each in fresh processes:
1. first preparation: `prepare_data` (BPE training and, with the token store, encoding), timed;
2. second start: `load_tokenizer` and `setup("fit")` as each rank runs them, timed, peak RSS;
3. two ranks at once: two processes run the second start, touch every train token, and when
   both are there read their Rss and Pss (proportional set size: a page shared by two processes
   counts half in each) from /proc/self/smaps_rollup.
Run it against any checkout: PYTHONPATH=<checkout>/src python experiments/wmt_scale/measure_data.py

Usage: python experiments/wmt_scale/measure_data.py --corpus /tmp/wmt_scale --cache /tmp/cache
"""

import argparse
import json
import subprocess
import sys
import tempfile

START = """
import json, resource, sys, time
from pathlib import Path
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.datamodule import TranslationDataModule
corpus, cache, step, ready = sys.argv[1:5]
splits = {"train": "train", "val": "val", "test": "test"}
dm = TranslationDataModule(TextCorpus(corpus, splits), "en", "de", vocab_size=37000,
                           max_tokens=3125, max_len=256, cache_dir=cache)
start = time.perf_counter()
if step == "prepare":
    dm.prepare_data()
else:
    dm.load_tokenizer()
    dm.setup("fit")
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
result = {"seconds": round(seconds, 2), "peak_rss_mb": peak}
if step == "pair":
    train = dm.datasets["train"]
    for side in (train.src, train.tgt):
        side.values.sum(dtype="int64")  # reads every page, as an epoch does
    result["train_tokens"] = len(train.src.values) + len(train.tgt.values)
    Path(ready, str(time.time_ns())).touch()
    while len(list(Path(ready).iterdir())) < 2:
        time.sleep(0.1)
    rollup = Path("/proc/self/smaps_rollup").read_text().splitlines()
    for line in rollup:
        key, *value = line.split()
        if key in ("Rss:", "Pss:", "Pss_File:", "Pss_Anon:"):
            result[key[:-1].lower() + "_mb"] = int(value[0]) // 1024
print(json.dumps(result))
"""


def run(step: str, corpus: str, cache: str, ready: str = "-", processes: int = 1) -> list[dict]:
    """Run `step` in `processes` fresh processes at once; their reports."""
    started = [
        subprocess.Popen(
            [sys.executable, "-c", START, corpus, cache, step, ready],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    return [json.loads(p.communicate()[0].splitlines()[-1]) for p in started]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--cache", required=True)
    args = parser.parse_args()
    print("first preparation", run("prepare", args.corpus, args.cache))
    print("second start", run("start", args.corpus, args.cache))
    with tempfile.TemporaryDirectory() as ready:
        print("two ranks", run("pair", args.corpus, args.cache, ready, processes=2))


if __name__ == "__main__":
    main()
