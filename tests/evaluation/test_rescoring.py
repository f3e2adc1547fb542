"""N-best rescoring: tuned weights rank by the features that match the references."""

import json

import pytest
from sacrebleu.metrics import BLEU

from transformer_nmt.cli.rescore import main as rescore_main
from transformer_nmt.data.corpus import DataError
from transformer_nmt.evaluation.rescoring import read_n_best, rerank, tune

REFERENCES = ["a dog runs", "two cats sleep", "the sun is hot", "it rains"]


def n_best_file(path):
    """Per sentence, the search's best (first) is wrong, its score, a log-probability, below the
    next line's (the length penalty ranked it first); a second model's log-probability (column
    4) prefers the reference."""
    lines = []
    for i, reference in enumerate(REFERENCES):
        lines.append(f"{i}\t-2.5\t{reference} today\t-5.0")  # longer, and the search's best
        lines.append(f"{i}\t-2.0\t{reference}\t-1.0")
        lines.append(f"{i}\t-3.0\tsomething else\t-9.0")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tuned_weights_beat_the_search_and_apply_to_the_same_features(tmp_path):
    n_best = read_n_best(n_best_file(tmp_path / "val.feats"), len(REFERENCES))
    assert n_best[0][1].features == (-2.0, -1.0, 3.0)  # score, nmt-score's column, words
    searched = [f"{r} today" for r in REFERENCES]
    assert rerank(n_best, [0.0, 0.0, 0.0]) == searched
    weights, bleu, search = tune(n_best, REFERENCES, trials=20, seed=3)
    assert search == pytest.approx(BLEU().corpus_score(searched, [REFERENCES]).score)
    assert bleu == pytest.approx(100.0) and search < bleu
    assert rerank(n_best, weights) == REFERENCES
    assert tune(n_best, REFERENCES, trials=20, seed=3)[0] == weights  # seeded


def test_the_command_tunes_then_applies(tmp_path, capsys):
    feats = n_best_file(tmp_path / "val.feats")
    (tmp_path / "val.en").write_text("\n".join(REFERENCES) + "\n")
    weights = tmp_path / "weights.json"
    rescore_main(["tune", str(feats), "--ref", str(tmp_path / "val.en"), "--output", str(weights)])
    assert "BLEU 100.00" in capsys.readouterr().out
    assert json.loads(weights.read_text())["bleu"] == pytest.approx(100.0)
    rescore_main(["apply", str(feats), "--weights", str(weights)])
    assert capsys.readouterr().out.splitlines() == REFERENCES


def test_an_n_best_with_other_columns_is_refused_naming_the_line(tmp_path):
    (tmp_path / "tokens.feats").write_text("0\t-1.0\ta dog\t-0.5 -0.25\n")
    with pytest.raises(DataError, match=r"tokens.feats, line 1: not 'line<TAB>score<TAB>text'"):
        read_n_best(tmp_path / "tokens.feats")
    (tmp_path / "ragged.feats").write_text("0\t-1.0\ta dog\t-0.5\n0\t-1.0\ta cat\n")
    with pytest.raises(DataError, match="ragged.feats, line 2: 3 columns, the first line 4"):
        read_n_best(tmp_path / "ragged.feats")


@pytest.mark.parametrize("text", ["weights: [1, 2]", '{"bleu": 30.1}', '{"weights": "high"}', "[]"])
def test_a_weights_file_that_is_not_tunes_is_refused_naming_it(tmp_path, text, capsys):
    feats, weights = tmp_path / "test.feats", tmp_path / "weights.json"
    feats.write_text("0\t-1.0\tone\n")
    weights.write_text(text)
    with pytest.raises(SystemExit) as info:
        rescore_main(["apply", str(feats), "--weights", str(weights)])
    assert f"error: {weights}: not a weights file of `nmt-rescore tune`" in str(info.value.code)
