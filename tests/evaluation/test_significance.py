"""Paired significance tests are sacreBLEU's: the same table, numbers and signatures as its CLI."""

import random
import subprocess
import sys

import pytest

from transformer_nmt.evaluation.significance import as_records, paired_test, table

WORDS = "a dog runs over the green grass while two children play ball in the park".split()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """References and three systems' outputs of different quality, as files."""
    rng = random.Random(0)
    references = [" ".join(rng.sample(WORDS, 6)) for _ in range(30)]

    def noisy(p: float) -> list[str]:
        return [
            " ".join(w if rng.random() > p else rng.choice(WORDS) for w in r.split())
            for r in references
        ]

    folder = tmp_path_factory.mktemp("systems")
    for name, lines in (
        ("ref", references),
        ("a", noisy(0.2)),
        ("b", noisy(0.6)),
        ("c", noisy(0.3)),
    ):
        (folder / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_the_table_is_sacrebleus_command_lines(files, test):
    names = ("a", "b", "c")
    read = {name: (files / f"{name}.txt").read_text().splitlines() for name in ("ref", *names)}
    systems = [(str(files / f"{name}.txt"), read[name]) for name in names]
    signatures, results = paired_test(systems, read["ref"], test)
    assert list(results) == ["System", "BLEU", "chrF2", "chrF2++", "TER"]
    command = [sys.executable, "-m", "sacrebleu", str(files / "ref.txt"), "-i"]
    command += [str(files / f"{name}.txt") for name in names]
    command += [f"--paired-{test}", "--no-color", "-f", "text"]
    # The command line computes chrF or chrF++ in one call: the table of each call's metrics.
    for metrics, options in (
        (["BLEU", "chrF2", "TER"], ["-m", "bleu", "chrf", "ter"]),
        (["chrF2++"], ["-m", "chrf", "--chrf-word-order", "2"]),
    ):
        cli = subprocess.run(
            command + options, capture_output=True, text=True, check=True, timeout=120
        )
        shown = {key: results[key] for key in ["System", *metrics]}
        assert table({m: signatures[m] for m in metrics}, shown, test, 0) == cli.stdout
    records = as_records(results)
    assert records[0]["system"] == f"Baseline: {files / 'a.txt'}"
    assert records[0]["BLEU"]["p_value"] is None and 0 < records[1]["BLEU"]["p_value"] < 0.05
    assert all(r["BLEU"]["p_value"] is not None for r in records[1:]) and len(records) == 3
    assert (records[1]["chrF2"]["ci"] is not None) == (test == "bs")


def test_systems_that_cannot_be_compared_are_refused(files):
    with pytest.raises(ValueError, match="at least two systems"):
        paired_test([("a", ["x"])], ["x"], "bs")
    with pytest.raises(ValueError, match="b: 1 lines for 2 references"):
        paired_test([("a", ["x", "y"]), ("b", ["x"])], ["x", "y"], "ar")
    with pytest.raises(ValueError, match="the paired test is one of"):
        paired_test([("a", ["x"]), ("b", ["x"])], ["x"], "t")
