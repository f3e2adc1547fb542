"""One model for many Multi30k directions against bilingual ones, zero-shot, and temperatures.

    python -m experiments.multilingual.run train --data ../shared/data --out outputs/multilingual
    python -m experiments.multilingual.run val --data ../shared/data --out outputs/multilingual
    python -m experiments.multilingual.run test --data ../shared/data --out outputs/multilingual
    python -m experiments.multilingual.run table --out outputs/multilingual

Rows (all `experiment=multi30k_de_en`'s narrow model and schedule, without R-Drop, whose updates
cost twice, each at a stated number of updates: UPDATES a direction):
- bilingual de-en, en-de, fr-en, cs-en: UPDATES each;
- the ten directions of de, en, fr and cs but fr-cs and cs-fr, the tag on the target side (the
  default) and on the source side: 10 x UPDATES, so a direction gets as many as a bilingual
  model at T=1 (the four languages' files are line-parallel: every direction has 29,000 pairs);
- de-en and en-de alone, the tag on either side (the same joint vocabulary's size): 2 x UPDATES,
  whether a side's result holds with two directions;
- de-en, en-de, fr-en, en-fr, cs-en, en-cs with cs<->en cut to their first 3,000 pairs
  (`data.max_train_pairs`), at T=1 and T=5: 6 x UPDATES each.

`train` runs each row's `train.py` in its own folder (a second call resumes an interrupted one
and skips a finished one); `val` and `test` run `nmt-evaluate` on each row's model at its budget
(`last.ckpt`), every direction the data holds, zero-shot ones included, with the off-target
rate; each split is evaluated once a model, a second call reuses the report. Pivoting
through English is the zero-shot remedy measured: fr->en then en->cs with the same model (and
cs->en->fr), scored as a direction. `table` prints the markdown table of test_2016 BLEU (and
off-target rates), with val beside it: a direction a line, a model a column. `source-use` prints
each row's mean log-probability of val de->en references given their sources and given shuffled
ones: how much the model reads its source.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from experiments.common.machine import cpu_description, load_average
from transformer_nmt import Translator
from transformer_nmt.data.bitext import read_lines
from transformer_nmt.evaluation.corpus_scores import score
from transformer_nmt.evaluation.directions import direction_report

UPDATES = 1000  # a direction's
NAN = float("nan")
SPLITS = {"val": "val", "test": "test_2016_flickr"}
COMMON = ["experiment=multi30k_de_en", "module.rdrop_alpha=0", "trainer.max_time=null"]
MULTILINGUAL = ["data=multi30k_multilingual", "data.src_lang=null", "data.tgt_lang=null"]
ZERO_SHOT = ["fr-cs", "cs-fr"]
MIX = ["de-en", "en-de", "fr-en", "en-fr", "cs-en", "en-cs"]
CUT = "{cs-en:3000,en-cs:3000}"


def rows(updates: int) -> dict[str, list[str]]:
    """Each row's train.py overrides, at `updates` a direction."""

    def bilingual(src: str, tgt: str) -> list[str]:
        return [f"data.src_lang={src}", f"data.tgt_lang={tgt}", f"trainer.max_steps={updates}"]

    def multilingual(directions: int, *options: str) -> list[str]:
        # The joint BPE of four languages: twice the one-pair recipe's 8,000 (the two-direction
        # rows keep it, so that only the number of directions differs from the ten).
        steps = f"trainer.max_steps={directions * updates}"
        return [*MULTILINGUAL, "data.vocab_size=16000", steps, *options]

    ten = f"data.exclude=[{','.join(ZERO_SHOT)}]"
    mix = [f"data.directions=[{','.join(MIX)}]", f"data.max_train_pairs={CUT}"]
    two = ["data.languages=[de,en]", "data.directions=[de-en,en-de]"]
    return {
        "bilingual-de-en": bilingual("de", "en"),
        "bilingual-en-de": bilingual("en", "de"),
        "bilingual-fr-en": bilingual("fr", "en"),
        "bilingual-cs-en": bilingual("cs", "en"),
        "ten-target-tag": multilingual(10, ten),
        "ten-source-tag": multilingual(10, ten, "data.tag_side=source"),
        "two-target-tag": multilingual(2, *two),
        "two-source-tag": multilingual(2, *two, "data.tag_side=source"),
        "cut-T1": multilingual(6, *mix),
        "cut-T5": multilingual(6, *mix, "data.temperature=5"),
    }


ROWS = list(rows(UPDATES))
PIVOTS = {"fr-cs": ("fr-en", "cs"), "cs-fr": ("cs-en", "fr")}  # zero-shot: (first leg, target)


def train(row: str, overrides: list[str], data: Path, out: Path) -> None:
    folder = out / row
    if (folder / "done").exists():
        return
    command = [sys.executable, "train.py", *COMMON, *overrides, f"paths.data_dir={data}"]
    command += [f"hydra.run.dir={folder}"]
    print("$", " ".join(command), file=sys.stderr, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    with open(out / f"{row}.train.log", "a", encoding="utf-8") as log:
        log.write(f"{load_average()}\n")
        log.flush()
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
    (folder / "done").write_text(f"{cpu_description()}\n", encoding="utf-8")


def final(row: str, out: Path) -> Path:
    """The row's model at its budget: the comparison is at a fixed number of updates."""
    path = out / row / "checkpoints" / "last.ckpt"
    if not (out / row / "done").exists():
        raise SystemExit(f"{out / row}: not trained to its budget yet; run `train` first")
    return path


def evaluate(row: str, split: str, data: Path, out: Path) -> None:
    """nmt-evaluate of the row's model at its budget on `split`, once, and its pivots."""
    where = out / row / "evaluation" / split
    report = where / "report.json"
    if not report.exists():
        checkpoint = str(final(row, out))
        if row.startswith("bilingual"):
            src, tgt = row.removeprefix("bilingual-").split("-")
            files = [f"{data}/multi30k/{SPLITS[split]}.{lang}.gz" for lang in (src, tgt)]
            command = ["nmt-evaluate", checkpoint, "--src", files[0], "--ref", files[1]]
        else:
            command = ["nmt-evaluate", checkpoint, "--data", "multi30k_multilingual"]
            command += ["--split", split, f"data.corpus.path={data}/multi30k"]
        command += ["--output-dir", str(where), "--threads", str(torch_threads())]
        print("$", " ".join(command), file=sys.stderr, flush=True)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    if row.startswith("ten-"):
        pivot(row, split, data, out, json.loads(report.read_text(encoding="utf-8")))


def pivot(row: str, split: str, data: Path, out: Path, report: dict) -> None:
    """Each zero-shot direction through English: the report's first leg's outputs, translated
    on into the target by the same model, scored as the direction."""
    where = out / row / "evaluation" / split
    path = where / "pivot.json"
    if path.exists():
        return
    torch.set_num_threads(torch_threads())
    translator = Translator.from_checkpoint(report["checkpoints"])
    scores = {}
    for direction, (leg, target) in PIVOTS.items():
        english = read_lines(where / leg / "hypotheses.txt")
        hypotheses = translator.translate(english, src_lang="en", tgt_lang=target)
        references = read_lines(data / "multi30k" / f"{SPLITS[split]}.{target}.gz")
        source = direction.split("-")[0]
        scores[direction] = direction_report(
            hypotheses, references, (source, target), translator.languages, score
        )
    path.write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")


def source_use(row: str, data: Path, out: Path, pairs: int = 200) -> str:
    """The model's mean log-probability of val de->en references given their sources, and
    given another sentence's source (each shifted by one): a model that reads its source
    loses much when the sources are shuffled, one that ignores them loses little."""
    torch.set_num_threads(torch_threads())
    translator = Translator.from_checkpoint(str(final(row, out)))
    sources = read_lines(data / "multi30k" / "val.de.gz")[:pairs]
    references = read_lines(data / "multi30k" / "val.en.gz")[:pairs]
    shifted = sources[1:] + sources[:1]
    languages = {"src_lang": "de", "tgt_lang": "en"} if translator.languages else {}
    nats = [
        sum(s.score for s in translator.score(given, references, **languages)) / pairs
        for given in (sources, shifted)
    ]
    return f"{row}: {nats[0]:.1f} nats a sentence, {nats[1]:.1f} with shuffled sources"


def torch_threads() -> int:
    return int(os.environ.get("OMP_NUM_THREADS", "1"))


def table(out: Path) -> str:
    """Markdown: a direction a line, a column a model (the bilingual rows share one), each cell
    test BLEU (val BLEU), and the off-target share of test outputs where it was measured."""
    columns = {"bilingual": [row for row in ROWS if row.startswith("bilingual")]}
    columns |= {row: [row] for row in ROWS if not row.startswith("bilingual")}
    found = {
        name: [(scored(row, "test", out), scored(row, "val", out)) for row in rows]
        for name, rows in columns.items()
    }
    directions = dict.fromkeys(d for splits in found.values() for t, v in splits for d in t | v)
    lines = [f"| direction | {' | '.join(columns)} |", "|---" * (len(columns) + 1) + "|"]
    for direction in directions:
        cells = [cell(direction, splits) for splits in found.values()]
        lines.append(f"| {direction} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def cell(direction: str, splits: list[tuple[dict, dict]]) -> str:
    for test, val in splits:
        if direction in test or direction in val:
            bleu = [s[direction]["BLEU"]["score"] if direction in s else NAN for s in (test, val)]
            text = f"{bleu[0]:.2f} ({bleu[1]:.2f})"
            off_target = test.get(direction, {}).get("off_target")  # none for a bilingual model
            return text + (f", {100 * off_target:.1f} % off" if off_target is not None else "")
    return ""


def scored(row: str, split: str, out: Path) -> dict[str, dict]:
    """Each direction's scores of the row's evaluation on `split` (none before it ran)."""
    where = out / row / "evaluation" / split
    if not (where / "report.json").exists():
        return {}
    report = json.loads((where / "report.json").read_text(encoding="utf-8"))
    if "directions" not in report:
        return {row.removeprefix("bilingual-"): report}
    directions = dict(report["directions"])
    if (where / "pivot.json").exists():
        pivots = json.loads((where / "pivot.json").read_text(encoding="utf-8"))
        directions |= {f"{name} via en": values for name, values in pivots.items()}
    return directions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stage", choices=["train", "val", "test", "table", "source-use"])
    parser.add_argument("--data", type=Path, help="the folder holding multi30k/")
    parser.add_argument("--out", type=Path, default=Path("outputs/multilingual"))
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=ROWS)
    parser.add_argument("--updates", type=int, default=UPDATES, help="a direction's")
    parser.add_argument("overrides", nargs="*", help="train.py overrides for every row")
    args = parser.parse_args()
    if args.stage == "table":
        print(table(args.out), end="")
        return
    if args.data is None:
        parser.error(f"{args.stage} needs --data")
    for row in args.rows:
        if args.stage == "train":
            overrides = [*rows(args.updates)[row], *args.overrides]
            train(row, overrides, args.data.resolve(), args.out.resolve())
        elif args.stage == "source-use":
            print(source_use(row, args.data.resolve(), args.out.resolve()), flush=True)
        else:
            evaluate(row, args.stage, args.data.resolve(), args.out.resolve())


if __name__ == "__main__":
    main()
