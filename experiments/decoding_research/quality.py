"""Decoding features' quality rows on Multi30k de→en, run as a user runs them: CLIs, then sacreBLEU.

    python -m experiments.decoding_research.quality A.ckpt --second B.ckpt --reverse R.ckpt \
        --data ../shared/data/multi30k --out /tmp/quality --threads 1

A and B: two seeds of `experiment=multi30k_de_en`; R: `experiment=multi30k_en_de`. Four
comparisons, each on val and on test (`test_2016_flickr`), every setting fixed before test is
decoded (the rescoring weights chosen on val), test decoded once per setting:
- the ensemble of A and B (beam 4) against each of them, with sacreBLEU's paired bootstrap on test;
- 4 samples a sentence (`--sample 4`) against the beam's 4-best: self-BLEU (each list of
  outputs scored against the other three; lower is more diverse), distinct outputs a sentence,
  and BLEU against the reference (the mean over the 4 lists);
- a terminology constraint a sentence, the reference's longest word (`constraint`): the share
  of outputs that contain it and BLEU, with and without `--constraints`;
- 8-best lists (beam 8) reranked by the forward score, A's forced-decoding score and R's
  reverse score (`nmt-score --reverse`), weights tuned on val (`nmt-rescore tune`), against
  beam 4 and beam 8.
Each command's output is kept in --out and reused by a rerun; `quality.json` holds the numbers.
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

from experiments.common.machine import cpu_description, load_average
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.evaluation import significance

SPLITS = {"val": "val", "test": "test_2016_flickr"}
N = 4  # samples, and n-best entries, a sentence
WORD = re.compile(r"[^\W\d_]+")


def constraint(reference: str) -> str:
    """The reference's longest word (the first of the longest): a term the output must contain."""
    return max(WORD.findall(reference), key=len, default="")


def contains(output: str, phrase: str) -> bool:
    """Whether `phrase` is in `output` as whole words."""
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", output) is not None


def n_best_lists(path: Path, sentences: int, n: int) -> list[list[str]]:
    """An n-best file ('line<TAB>score<TAB>text', lines from 0) as n lists, one a rank."""
    ranked: list[list[str]] = [[] for _ in range(sentences)]
    for row in path.read_text(encoding="utf-8").splitlines():
        line, _, text = row.split("\t")[:3]
        ranked[int(line)].append(text)
    if any(len(r) != n for r in ranked):
        raise ValueError(f"{path}: not {n} outputs for every one of {sentences} sentences")
    return [[r[i] for r in ranked] for i in range(n)]


def self_bleu(lists: list[list[str]]) -> float:
    """The mean over the lists of each one's corpus BLEU against all the others as references."""
    scores = []
    for i, hypotheses in enumerate(lists):
        others = [lists[j] for j in range(len(lists)) if j != i]
        scores.append(BLEU().corpus_score(hypotheses, others).score)
    return sum(scores) / len(scores)


def distinct(lists: list[list[str]]) -> float:
    """Distinct outputs a sentence, on average."""
    return sum(len(set(outputs)) for outputs in zip(*lists, strict=True)) / len(lists[0])


def scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    return {
        "bleu": round(BLEU().corpus_score(hypotheses, [references]).score, 2),
        "chrf": round(CHRF().corpus_score(hypotheses, [references]).score, 2),
    }


class Runner:
    """Runs a command once: its stdout kept in `out`/name, reused by a rerun."""

    def __init__(self, out: Path, threads: int):
        self.out, self.threads = out, threads

    def __call__(self, name: str, command: list[str]) -> Path:
        path = self.out / name
        if not path.exists():
            print("$", " ".join(command), ">", path, file=sys.stderr, flush=True)
            partial = path.with_suffix(".partial")
            with partial.open("w", encoding="utf-8") as stdout:
                subprocess.run(command, stdout=stdout, check=True)
            partial.rename(path)
        return path

    def translate(self, name: str, checkpoint: str, source: Path, *options: str) -> Path:
        return self(
            name,
            ["nmt-translate", checkpoint, str(source), "--threads", str(self.threads), *options],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="de→en checkpoint A")
    parser.add_argument("--second", required=True, help="de→en checkpoint B, another seed")
    parser.add_argument("--reverse", required=True, help="en→de checkpoint R")
    parser.add_argument("--data", type=Path, required=True, help="folder of Multi30k's .gz files")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run = Runner(args.out, args.threads)
    a, b, r = args.model, args.second, args.reverse
    results: dict = {"machine": cpu_description(), "load": load_average(), "splits": {}}
    # val first: the rescoring weights are chosen there before test is decoded.
    for split, stem in SPLITS.items():
        source = args.data / f"{stem}.de.gz"
        refs = list(read_lines(args.data / f"{stem}.en.gz"))
        row: dict = {}
        outputs = {
            "A": run.translate(f"{split}.A", a, source),
            "B": run.translate(f"{split}.B", b, source),
            "A+B": run.translate(f"{split}.AB", a, source, "--ensemble", b),
        }
        texts = {k: p.read_text(encoding="utf-8").splitlines() for k, p in outputs.items()}
        row["ensemble"] = {k: scores(v, refs) for k, v in texts.items()}
        if split == "test":
            systems = [(k, texts[k]) for k in ("A", "B", "A+B")]
            signatures, paired = significance.paired_test(systems, refs, "bs")
            table = significance.table(signatures, paired, "bs", 0)
            (args.out / "test.ensemble_bs.txt").write_text(table, encoding="utf-8")
            row["ensemble_paired_bs"] = significance.as_records(paired)

        sampled = run.translate(f"{split}.sample", a, source, "--sample", str(N), "--seed", "1")
        n_best = run.translate(f"{split}.nbest4", a, source, "--n-best", str(N))
        row["diversity"] = {}
        for kind, path in (("sampling", sampled), ("beam 4-best", n_best)):
            lists = n_best_lists(path, len(refs), N)
            bleus = [BLEU().corpus_score(h, [refs]).score for h in lists]
            row["diversity"][kind] = {
                "self_bleu": round(self_bleu(lists), 2),
                "distinct": round(distinct(lists), 2),
                "bleu_mean": round(sum(bleus) / N, 2),
            }

        terms = [constraint(ref) for ref in refs]
        listing = args.out / f"{split}.constraints"
        listing.write_text("".join(f"{i + 1}\t{t}\n" for i, t in enumerate(terms) if t))
        constrained = run.translate(
            f"{split}.constrained", a, source, "--constraints", str(listing)
        )
        row["constraints"] = {}
        for kind, path in (("beam 4", outputs["A"]), ("beam 4, constrained", constrained)):
            hyps = path.read_text(encoding="utf-8").splitlines()
            met = sum(contains(h, t) for h, t in zip(hyps, terms, strict=True) if t)
            row["constraints"][kind] = {
                **scores(hyps, refs),
                "met": met,
                "of": sum(map(bool, terms)),
            }

        nbest8 = run.translate(f"{split}.nbest8", a, source, "--n-best", "8", "--beam-size", "8")
        forward = run(
            f"{split}.fwd",
            [
                "nmt-score",
                a,
                "--src",
                str(source),
                "--n-best",
                str(nbest8),
                "--threads",
                str(args.threads),
            ],
        )
        features = run(
            f"{split}.feats",
            [
                "nmt-score",
                r,
                "--src",
                str(source),
                "--n-best",
                str(forward),
                "--reverse",
                "--threads",
                str(args.threads),
            ],
        )
        weights = args.out / "weights.json"
        if split == "val":
            run(
                "val.tune.log",
                [
                    "nmt-rescore",
                    "tune",
                    str(features),
                    "--ref",
                    str(args.data / f"{stem}.en.gz"),
                    "--output",
                    str(weights),
                ],
            )
        reranked = run(
            f"{split}.rescored", ["nmt-rescore", "apply", str(features), "--weights", str(weights)]
        )
        beam8 = n_best_lists(nbest8, len(refs), 8)[0]
        row["rescoring"] = {
            "beam 4": scores(texts["A"], refs),
            "beam 8": scores(beam8, refs),
            "beam 8, reranked": scores(reranked.read_text(encoding="utf-8").splitlines(), refs),
        }
        results["splits"][split] = row
    results["weights"] = json.loads((args.out / "weights.json").read_text())
    (args.out / "quality.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
