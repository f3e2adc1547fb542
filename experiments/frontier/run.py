"""The speed-quality frontier: BLEU against sentences a second for a teacher and its students, on
each engine and precision, at 1 and 2 threads, greedy and beam 4, in one run.

    python -m experiments.frontier.run --model teacher=T.ckpt --model 6-1=S61.ckpt ... \
        --data ../shared/data/multi30k --out /tmp/frontier

Each (threads, beam, model) is one `experiments.export.benchmark` call on Multi30k's
test_2016_flickr: every engine in a fresh process (ours in float32 and int8, transformers'
`generate` on the `nmt-export hf` MarianMT folder, CTranslate2 in float32 and int8), the median of
--repeats passes. A finished call's JSON is kept in --out and reused by a rerun. The table: each
model's sentences a second and BLEU on each engine, its speed over the first model's on the same
engine, precision, threads and search, its CTranslate2 int8 over the first model's ours in float32
(what a deployment gains over the default), and ours over CTranslate2 at each precision.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from experiments.common.machine import cpu_description, load_average

# The -workers rows (a worker per thread, as CTranslate2 runs) are skipped at one thread.
ENGINES = (
    "ours",
    "ours-int8",
    "ours-workers",
    "ours-int8-workers",
    "hf",
    "ct2-float32",
    "ct2-int8",
)
SAME_PRECISION = {
    "ours": "ct2-float32",
    "ours-int8": "ct2-int8",
    "ours-workers": "ct2-float32",
    "ours-int8-workers": "ct2-int8",
}


def parameters(checkpoint: str) -> int:
    from transformer_nmt.checkpoint import load_checkpoint

    return sum(p.numel() for p in load_checkpoint(checkpoint)[0].parameters())


def table(rows: list[dict], first: str) -> str:
    """Markdown, a row a (threads, search, model)."""
    lines = [
        "| threads | search | model | params | "
        + " | ".join(f"{e} sent/s (BLEU)" for e in ENGINES)
        + " | × first, ours / ours-int8 / ct2-int8 | ct2-int8 × first's ours |"
        + " ours / ct2, fp32 / int8 (-workers: fp32 / int8) |",
        "|" + "---|" * (7 + len(ENGINES)),
    ]
    base = {(r["threads"], r["beam"]): r for r in rows if r["model"] == first}
    for r in rows:
        speed = {e["engine"]: e for e in r["engines"]}
        cells = [
            f"{speed[e]['sentences_per_second']:.1f} ({speed[e]['BLEU']:.2f})" if e in speed else ""
            for e in ENGINES
        ]
        b = {e["engine"]: e for e in base[(r["threads"], r["beam"])]["engines"]}
        faster = " / ".join(
            f"{speed[e]['sentences_per_second'] / b[e]['sentences_per_second']:.2f}"
            for e in ("ours", "ours-int8", "ct2-int8")
        )
        ratios = [
            f"{speed[o]['sentences_per_second'] / speed[c]['sentences_per_second']:.2f}"
            for o, c in SAME_PRECISION.items()
            if o in speed
        ]
        to_ct2 = " / ".join(ratios[:2]) + (f" ({' / '.join(ratios[2:])})" if ratios[2:] else "")
        deployed = speed["ct2-int8"]["sentences_per_second"] / b["ours"]["sentences_per_second"]
        search = "greedy" if r["beam"] == 1 else f"beam {r['beam']}"
        lines.append(
            f"| {r['threads']} | {search} | {r['model']} | {r['parameters'] / 1e6:.2f} M | "
            + " | ".join(cells)
            + f" | {faster} | {deployed:.2f} | {to_ct2} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model", action="append", required=True, metavar="NAME=CKPT",
        help="a model to measure (repeat); the first is the one the others are compared with",
    )  # fmt: skip
    parser.add_argument("--data", type=Path, required=True, help="folder of Multi30k's .gz files")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    models = dict(m.split("=", 1) for m in args.model)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"CPU {cpu_description()}; {load_average()}", flush=True)
    sizes = {name: parameters(ckpt) for name, ckpt in models.items()}
    rows = []
    for threads in args.threads:
        for beam in args.beams:
            for name, ckpt in models.items():
                out = args.out / f"{name}.t{threads}.b{beam}.json"
                if not out.exists():
                    command = [sys.executable, "-m", "experiments.export.benchmark", ckpt]
                    command += ["--src", str(args.data / "test_2016_flickr.de.gz")]
                    command += ["--ref", str(args.data / "test_2016_flickr.en.gz")]
                    command += ["--threads", str(threads), "--beam-size", str(beam)]
                    command += ["--repeats", str(args.repeats), "--engines", *ENGINES]
                    command += ["--out", str(out)]
                    print("$", " ".join(command), f"({load_average()})", flush=True)
                    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
                engines = json.loads(out.read_text())
                rows.append(
                    {"threads": threads, "beam": beam, "model": name, "checkpoint": ckpt}
                    | {"parameters": sizes[name], "engines": engines}
                )
    markdown = table(rows, next(iter(models)))
    (args.out / "frontier.json").write_text(json.dumps(rows, indent=2) + "\n")
    (args.out / "frontier.md").write_text(markdown + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
