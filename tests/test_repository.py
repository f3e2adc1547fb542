"""The repository carries no diary: a tracked file states what is true and links its evidence,
it does not point into a numbered work log that no reader has."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A numbered work-log reference: "session 42", "sessions 33 and 34", "stop 3", "42's hour", and
# the tracker's "issue 17", "Issue #3", which no reader of the repository can open.
WORK_LOG = re.compile(r"\bsessions? \d+|\bstop \d+\b|\b\d+'s hour\b|\bissues? #?\d+", re.IGNORECASE)


@pytest.mark.parametrize(
    "text",
    [
        "as in session 42",
        "Sessions 33 and 34 scored",
        "see stop 3",
        "31's hour",
        "Issue 17's goals",
        "issue #3 aims",
    ],
)
def test_the_pattern_finds_work_log_references(text):
    assert WORK_LOG.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "Optuna's trial 6",
        "at step 100",
        "stops 5 minutes early",
        "a W&B session",
        "the recipe's hour",
        "nonstop 3",
    ],
)
def test_the_pattern_leaves_other_numbers_alone(text):
    assert not WORK_LOG.search(text)


def tracked_text_files() -> list[Path]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    paths = [ROOT / name.decode() for name in names if name]
    return [p for p in paths if p.is_file() and b"\0" not in p.read_bytes()[:8192]]


def test_no_tracked_file_refers_to_a_numbered_work_log():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in tracked_text_files()
        if path != Path(__file__).resolve()  # its examples above
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if WORK_LOG.search(line)
    ]
    assert not found, (
        "numbered work-log references (say why in a line and link the experiment record, "
        "experiments/<name>/README.md, instead):\n" + "\n".join(found)
    )
