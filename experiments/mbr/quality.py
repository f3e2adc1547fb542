"""MBR decoding against beam search on Multi30k de→en, run as a user runs it: CLIs, then sacreBLEU.

    python -m experiments.mbr.quality A.ckpt --data ../shared/data/multi30k --out /tmp/mbr \
        --threads 2

Settings: beam 4 (`nmt-translate`'s default), and MBR with the chrF utility (`--mbr N`) at each N
of --n over three candidate sources: the beam's N-best (`--mbr-candidates beam --beam-size N`),
N ancestral samples, and N epsilon samples (`--epsilon`); the pseudo-references are the N samples
of the same kind (ancestral for the beam's candidates). val first: every setting decoded, scored
and the best by val chrF named; then test, each setting decoded once, scored in BLEU, chrF,
chrF++ and TER with sacreBLEU's paired bootstrap against beam 4. Seconds a sentence: the
translation's own time as nmt-translate logs it (its "done, N sentences in M:SS" line; loading
not included) over N; each log's first line is the machine's load as that run began. Outputs and
logs are kept in --out and reused by a rerun, which scores them again; `mbr.json` holds the
numbers.
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from experiments.common.machine import cpu_description, load_average
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.evaluation import corpus_scores, significance

SPLITS = {"val": "val", "test": "test_2016_flickr"}
BASELINE = "beam 4"
METRICS = ("BLEU", "chrF2", "chrF2++", "TER")  # as nmt-evaluate names them
DONE = re.compile(r"translating: done, ([\d,]+) sentences in ([\d:]+)")


def settings(ns: list[int], epsilon: float) -> dict[str, list[str]]:
    """Each setting's name and its nmt-translate options."""
    out = {BASELINE: []}
    for n in ns:
        beam = ["--mbr-candidates", "beam", "--beam-size", str(n)]
        out[f"MBR, beam {n}-best"] = ["--mbr", str(n), *beam]
        out[f"MBR, {n} samples"] = ["--mbr", str(n)]
        out[f"MBR, {n} epsilon samples"] = ["--mbr", str(n), "--epsilon", str(epsilon)]
    return out


def scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    """The corpus scores `nmt-evaluate` reports, those of the table."""
    report = corpus_scores.score(hypotheses, references)
    return {name: round(report[name]["score"], 2) for name in METRICS}


def translate(out: Path, name: str, command: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The command's output lines, and its seconds a sentence and the machine's load as it
    started, from its log (run once, then kept)."""
    path, log = out / name, out / f"{name}.log"
    if not path.exists():
        print("$", " ".join(command), ">", path, file=sys.stderr, flush=True)
        partial = path.with_name(f"{path.name}.partial")
        log.write_text(load_average() + "\n", encoding="utf-8")
        with partial.open("w", encoding="utf-8") as stdout, log.open("a") as stderr:
            subprocess.run(command, stdout=stdout, stderr=stderr, check=True)
        partial.rename(path)
    text = log.read_text(encoding="utf-8")
    done = DONE.findall(text)
    if not done:
        raise SystemExit(f"{log}: no 'translating: done' line to time the run by")
    sentences, clock = done[-1]
    seconds = sum(int(p) * 60**i for i, p in enumerate(reversed(clock.split(":"))))
    timing = {
        "s_per_sentence": round(seconds / int(sentences.replace(",", "")), 4),
        "load": text.splitlines()[0],
    }
    return path.read_text(encoding="utf-8").splitlines(), timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="de→en checkpoint")
    parser.add_argument("--data", type=Path, required=True, help="folder of Multi30k's .gz files")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, nargs="+", default=[16, 32], help="candidates")
    parser.add_argument("--epsilon", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": cpu_description(), "threads": args.threads}
    results |= {"seed": args.seed, "splits": {}}
    for split, stem in SPLITS.items():
        source = args.data / f"{stem}.de.gz"
        refs = list(read_lines(args.data / f"{stem}.en.gz"))
        rows = results["splits"][split] = {}
        outputs = {}
        for name, options in settings(args.n, args.epsilon).items():
            command = ["nmt-translate", args.model, str(source), "--threads", str(args.threads)]
            command += [*options, "--seed", str(args.seed)] if options else []
            file = f"{split}." + name.replace(" ", "_").replace(",", "")
            outputs[name], timing = translate(args.out, file, command)
            rows[name] = scores(outputs[name], refs) | timing
        if split == "val":
            best = max((n for n in rows if n != BASELINE), key=lambda n: rows[n]["chrF2"])
            results["best_on_val"] = best
        else:
            systems = [(name, outputs[name]) for name in outputs]
            signatures, paired = significance.paired_test(systems, refs, "bs")
            table = significance.table(signatures, paired, "bs", 0)
            (args.out / "test.paired_bs.txt").write_text(table, encoding="utf-8")
            results["test_paired_bs"] = significance.as_records(paired)
        (args.out / "mbr.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
