import csv

import pytest

from helpers.full_disk import fill_disk_after
from transformer_nmt.training.callbacks.translation_table import COLUMNS, TranslationTable

ROWS = [[3, "a\tb", 'ein "Zitat"', "hyp", 12.5], [3, "c", "d", "", 0.0]]


def read(path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t"))


def test_rows_are_appended_under_one_header(tmp_path):
    path = tmp_path / "translations.tsv"
    TranslationTable._append_tsv(path, ROWS)
    TranslationTable._append_tsv(path, [[6, "e", "f", "g", 50.0]])
    expected = [COLUMNS, *[[str(v) for v in row] for row in ROWS], ["6", "e", "f", "g", "50.0"]]
    assert read(path) == expected


def test_a_write_that_fails_keeps_every_earlier_row_whole(tmp_path, monkeypatch):
    path = tmp_path / "translations.tsv"
    TranslationTable._append_tsv(path, ROWS)
    before = path.read_bytes()
    fill_disk_after(monkeypatch, room=len(before) + 5)  # the new row would be cut short
    with pytest.raises(OSError, match="translations.tsv: no space left"):
        TranslationTable._append_tsv(path, [[6, "e", "f", "g", 50.0]])
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["translations.tsv"]
