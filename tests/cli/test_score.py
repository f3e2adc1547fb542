"""nmt-score and nmt-translate refuse, before loading a model, what they cannot score or align."""

import pytest

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.cli.score import main as score_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.tokenizer import BPETokenizer


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--src", "a"], "one of the arguments --tgt --n-best --tsv is required"),
        (["--tsv", "p", "--src", "a"], "give --src with --tgt or --n-best, or --tsv alone"),
        (["--tsv", "p", "--align-layer", "2"], "--align-layer chooses the attention of --align"),
        (["--tsv", "p", "--align", "--ensemble", "b"], "--align reads one model's attention"),
        (["--tsv", "p", "--align-layer", "0"], "argument --align-layer: must be an integer >= 1"),
        (["--tsv", "p", "--batch-size", "0"], "argument --batch-size: must be an integer >= 1"),
        (["--tsv", "p", "--ensemble", "b", "--weights", "1"], "--weights: 1 given for 2"),
        (["--tsv", "p", "--align-heads", "max"], "argument --align-heads: invalid choice"),
    ],
)
def test_score_options_that_cannot_work_are_refused_before_loading(args, expected, capsys):
    with pytest.raises(SystemExit) as info:
        score_main(["some.ckpt", *args])
    assert info.value.code == 2
    assert expected in capsys.readouterr().err


def test_an_n_best_line_of_no_source_is_refused_naming_it(tmp_path):
    (tmp_path / "src.txt").write_text("one\ntwo\n")
    (tmp_path / "nbest.txt").write_text("0\t-1.0\teins\n2\t-1.0\tdrei\n")
    args = ["--src", str(tmp_path / "src.txt"), "--n-best", str(tmp_path / "nbest.txt")]
    with pytest.raises(SystemExit, match=r"nbest.txt, line 2: not 'line<TAB>score<TAB>text'"):
        score_main([str(tmp_path / "missing.ckpt"), *args])


def test_translate_refuses_alignments_it_cannot_make(capsys):
    for args, expected in [
        (["--align-layer", "1"], "--align-layer chooses the attention of --align"),
        (["--align", "--ensemble", "b.ckpt"], "--align reads one model's attention"),
    ]:
        with pytest.raises(SystemExit):
            translate_main(["some.ckpt", *args])
        assert expected in capsys.readouterr().err


@pytest.mark.parametrize("family", ["transformer", "rnn_attention"])
def test_an_alignment_layer_the_decoder_lacks_is_refused_before_any_line(family, tmp_path, capsys):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    layers = {"transformer": dict(N=2), "rnn_attention": {}}[family]
    ckpt = str(write_checkpoint(tmp_path / "m.ckpt", tokenizer, family=family, **layers))
    count = 2 if family == "transformer" else 1
    (tmp_path / "in.txt").write_text("one two\nthree\n")
    expected = f"--align-layer 5: the decoder has {count} layers; choose 1 to {count}"
    source = str(tmp_path / "in.txt")
    with pytest.raises(SystemExit, match=expected):
        translate_main([ckpt, source, "--align", "--align-layer", "5", "--batch-size", "1"])
    with pytest.raises(SystemExit, match=expected):
        score_main([ckpt, "--src", source, "--tgt", source, "--align", "--align-layer", "5"])
    assert capsys.readouterr().out == ""
    translate_main([ckpt, source, "--align", "--align-layer", str(count), "--max-len-b", "2"])
    assert len(capsys.readouterr().out.splitlines()) == 2
