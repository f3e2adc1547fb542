"""`nmt-evaluate` of a multilingual checkpoint: each direction translated with its tag and scored
as sacreBLEU scores its outputs, its off-target rate, the means; bad requests in one line."""

import json

import matplotlib.image
import numpy as np
import pytest
import sacrebleu

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from helpers.multilingual_files import write_parallel
from helpers.multilingual_model import train_multilingual
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.evaluation.direction_grid import draw_direction_grid
from transformer_nmt.evaluation.off_target import off_target_rate
from transformer_nmt.inference.translator import Translator

LANGUAGES = ["en", "de", "fr"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A model of en, de and fr trained on every direction but fr-de, and its test files."""
    folder = tmp_path_factory.mktemp("multilingual")
    data = write_parallel(folder / "data", {"test": 12}, languages=LANGUAGES, seed=7)
    return train_multilingual(folder / "model.ckpt"), data


def test_each_direction_scores_as_sacrebleu_scores_its_translations(model, tmp_path, capsys):
    path, data = model
    out = tmp_path / "eval"
    evaluate_main(
        [
            str(path), "--data", "multi30k_multilingual", "--split", "test",
            f"data.corpus.path={data}", "data.languages=[en,de,fr]", "data.corpus.splits.test=test",
            "--beam-size", "2", "--device", "cpu", "--output-dir", str(out),
        ]
    )  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    names = ["en-de", "en-fr", "de-en", "de-fr", "fr-en", "fr-de"]  # trained first, as saved
    assert list(report["directions"]) == names
    assert [n for n, r in report["directions"].items() if r["zero_shot"]] == ["fr-de"]
    translator = Translator.from_checkpoint(path, device="cpu")
    for name, r in report["directions"].items():
        src, tgt = name.split("-")
        sources = (data / f"test.{src}").read_text().splitlines()
        references = (data / f"test.{tgt}").read_text().splitlines()
        hypotheses = (out / name / "hypotheses.txt").read_text().splitlines()
        assert hypotheses == translator.translate(sources, beam_size=2, tgt_lang=tgt)
        assert r["sentences"] == len(references) == 12
        assert r["BLEU"]["score"] == pytest.approx(
            sacrebleu.corpus_bleu(hypotheses, [references]).score
        )
        assert r["chrF2++"]["score"] == pytest.approx(
            sacrebleu.corpus_chrf(hypotheses, [references], word_order=2).score
        )
        assert r["TER"]["score"] == pytest.approx(
            sacrebleu.corpus_ter(hypotheses, [references]).score
        )
        assert r["off_target"] == off_target_rate(hypotheses, tgt, LANGUAGES)
    directions = report["directions"].values()
    assert report["mean"]["all"]["BLEU"] == pytest.approx(
        sum(r["BLEU"]["score"] for r in directions) / 6
    )
    assert report["mean"]["zero_shot"]["chrF2"] == report["directions"]["fr-de"]["chrF2"]["score"]
    rows = [line.split("\t") for line in (out / "directions.tsv").read_text().splitlines()]
    assert rows[0] == ["direction", "zero_shot", "sentences", "BLEU", "chrF2", "chrF2++", "TER",
                       "off_target"]  # fmt: skip
    assert [row[0] for row in rows[1:]] == [*names, "mean", "mean_trained", "mean_zero_shot"]
    assert rows[6][1] == "true" and float(rows[6][3]) == pytest.approx(
        report["directions"]["fr-de"]["BLEU"]["score"], abs=0.005
    )
    assert "fr-de*" in capsys.readouterr().out
    grid = draw_direction_grid(
        translator.languages,
        {n: r["BLEU"]["score"] for n, r in report["directions"].items()},
        tmp_path / "again.png",
    )
    assert grid[2, 1] == report["directions"]["fr-de"]["BLEU"]["score"]  # row fr, column de
    drawn = matplotlib.image.imread(out / "bleu_grid.png")
    assert np.array_equal(drawn, matplotlib.image.imread(tmp_path / "again.png"))


def test_file_pairs_name_their_directions(model, tmp_path):
    path, data = model
    out = tmp_path / "eval"
    evaluate_main(
        [
            str(path), "--src", str(data / "test.de"), str(data / "test.en"),
            "--ref", str(data / "test.fr"), str(data / "test.de"), "--directions", "de-fr", "en-de",
            "--beam-size", "1", "--device", "cpu", "--output-dir", str(out),
        ]
    )  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    assert list(report["directions"]) == ["de-fr", "en-de"]
    assert report["test_sets"]["de-fr"] == {
        "src": str(data / "test.de"),
        "ref": str(data / "test.fr"),
    }
    assert "zero_shot" not in report["mean"]  # both trained


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (
            ["--directions", "de-xx"],
            "--directions de-xx: the model knows no language 'xx'; it knows en, de, fr",
        ),
        (["--directions", "de"], "--directions: 'de' is no direction; write src-tgt"),
        (["--directions", "de-fr", "en-fr"], "2 --directions for 1 --src/--ref pairs"),
    ],
)
def test_directions_the_model_cannot_evaluate_are_refused_in_one_line(
    model, words, message, capsys
):
    path, data = model
    files = ["--src", str(data / "test.de"), "--ref", str(data / "test.fr")]
    with pytest.raises(SystemExit) as raised:
        evaluate_main([str(path), *files, *words, "--device", "cpu"])
    text = str(raised.value) if raised.value.code != 2 else capsys.readouterr().err
    assert message in text
    assert len(text.strip().splitlines()[-1]) > 0


def test_a_checkpoint_without_languages_refuses_per_direction_evaluation(model, tmp_path):
    _, data = model
    plain = write_checkpoint(tmp_path / "plain.ckpt", BPETokenizer.train(SENTENCES, 300, 1))
    files = ["--src", str(data / "test.de"), "--ref", str(data / "test.fr")]
    with pytest.raises(SystemExit) as raised:
        evaluate_main([str(plain), *files, "--directions", "de-fr", "--device", "cpu"])
    message = str(raised.value)
    assert message.startswith(f"error: {plain} records no languages: per-direction evaluation")
    assert "\n" not in message
