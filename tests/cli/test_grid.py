"""nmt-evaluate's grid: its cells, their folders and the table."""

import pytest

from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.cli.grid import Setting, settings, table


def test_every_combination_once_grouped_by_average():
    grid = settings([10, 5, 10], [4, 4], [1.0, 2.0])
    assert grid == [
        Setting(10, 4, 1.0),
        Setting(10, 4, 2.0),
        Setting(5, 4, 1.0),
        Setting(5, 4, 2.0),
    ]


def test_without_average_last_the_checkpoints_given_are_one_cell_per_search():
    assert settings(None, [1, 4], [0.6]) == [Setting(None, 1, 0.6), Setting(None, 4, 0.6)]


def test_folder_names_say_the_setting():
    assert Setting(5, 4, 0.6).name == "avg5_beam4_alpha0.6"
    assert Setting(None, 1, 2.0).name == "beam1_alpha2"


def test_the_table_marks_the_best_bleu():
    def scores(bleu: float) -> dict:
        return {"BLEU": {"score": bleu}, "chrF2": {"score": 60.0}} | {
            "chrF2++": {"score": 58.0},
            "TER": {"score": 40.5},
        }

    rows = [(Setting(5, 4, 1.0), scores(42.1)), (Setting(10, 4, 2.0), scores(43.204))]
    lines = table(rows).splitlines()
    assert lines[2] == "| 5 | 4 | 1 | 42.10 | 60.00 | 58.00 | 40.50 |"
    assert lines[3] == "| 10 | 4 | 2 | **43.20** | 60.00 | 58.00 | 40.50 |"


def test_a_grid_on_the_test_split_is_warned_about(tmp_path, capsys):
    missing = str(tmp_path / "missing.ckpt")
    with pytest.raises(SystemExit, match="missing.ckpt"):
        evaluate_main([missing, "--data", "toy", "--split", "test", "--alpha", "1", "2"])
    assert "a grid on the test split chooses decoding on test" in capsys.readouterr().err
