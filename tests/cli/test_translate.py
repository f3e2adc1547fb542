import json

import pytest
import sacrebleu
import torch
from sacrebleu.metrics import CHRF, TER

from helpers.checkpoint_files import SENTENCES as WORDS
from helpers.checkpoint_files import TINY, write_checkpoint
from transformer_nmt.cli.average import main as average_main
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.inference.translator import Translator
from transformer_nmt.model import FAMILIES, Transformer

SENTENCES = ["one two three", "four", "", "five six seven eight nine", "two"]


@pytest.mark.parametrize("family", ["transformer", "rnn_attention"])
def test_batches_keep_the_input_order(family, device):
    torch.manual_seed(0)
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=270, min_frequency=1)
    model = FAMILIES[family].model(tokenizer.vocab_size, PAD_ID, **TINY[family]).eval()
    options = dict(beam_size=2, max_len_b=3)
    translator = Translator(model, tokenizer, device=device)
    batched = list(translator.stream(SENTENCES, batch_size=2, **options))
    alone = [next(translator.stream([s], batch_size=1, **options)) for s in SENTENCES]
    assert [[text for text, _ in n_best] for n_best in batched] == [
        [text for text, _ in n_best] for n_best in alone
    ]
    assert len(batched) == len(SENTENCES)


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--batch-size", "0", "must be an integer >= 1, got '0'"),  # was: no output, exit 0
        ("--beam-size", "0", "must be an integer >= 1, got '0'"),
        ("--max-len-b", "-5", "must be an integer >= 0, got '-5'"),
        ("--alpha", "nan", "must be a finite number, got 'nan'"),
        ("--alpha", "inf", "must be a finite number, got 'inf'"),
        ("--threads", "0", "must be an integer >= 1, got '0'"),
        ("--n-best", "0", "must be an integer >= 1, got '0'"),
        ("--average-last", "0", "must be an integer >= 1, got '0'"),
        ("--batch-size", "two", "must be an integer >= 1, got 'two'"),
        ("--max-tokens", "0", "must be an integer >= 1, got '0'"),
        ("--weights", "0", "must be a finite number > 0, got '0'"),
        ("--weights", "nan", "must be a finite number > 0, got 'nan'"),
        ("--sample", "0", "must be an integer >= 1, got '0'"),
        ("--top-k", "0", "must be an integer >= 1, got '0'"),
        ("--top-p", "0", "must be a number in (0, 1], got '0'"),
        ("--top-p", "1.5", "must be a number in (0, 1], got '1.5'"),
        ("--temperature", "0", "must be a finite number > 0, got '0'"),
        ("--temperature", "-1", "must be a finite number > 0, got '-1'"),
        ("--seed", "-1", "must be an integer >= 0, got '-1'"),
        ("--shards", "0", "must be an integer >= 1, got '0'"),
    ],
)
def test_options_out_of_range_are_refused_naming_the_range(option, value, expected, capsys):
    with pytest.raises(SystemExit) as info:
        translate_main(["some.ckpt", option, value])
    assert info.value.code == 2
    assert f"argument {option}: {expected}" in capsys.readouterr().err


def test_more_best_translations_than_the_beam_holds_are_refused(capsys):
    with pytest.raises(SystemExit):
        translate_main(["some.ckpt", "--beam-size", "2", "--n-best", "3"])
    assert "--n-best 3 exceeds --beam-size 2" in capsys.readouterr().err


@pytest.mark.parametrize("main", [evaluate_main, average_main])
def test_average_last_zero_is_refused_by_evaluate_and_average(main, tmp_path, capsys):
    # Was: a folder's last 0 checkpoints were all of them ([-0:]).
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--average-last", "0"])
    assert "argument --average-last: must be an integer >= 1, got '0'" in capsys.readouterr().err


def test_a_batch_size_below_one_is_an_error_not_an_empty_output():
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=270, min_frequency=1)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2).eval()
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        next(Translator(model, tokenizer, device="cpu").stream(SENTENCES, batch_size=0))


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("gpu", "--device gpu: not a device name; use cpu, cuda or cuda:N"),
        pytest.param(
            "cuda",
            "--device cuda: this machine has no CUDA GPU torch can use; --device cpu",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is here"),
        ),
        ("cuda:99", "--device cuda:99: "),
    ],
)
@pytest.mark.parametrize("main", [translate_main, evaluate_main])
def test_a_device_this_machine_lacks_is_a_message_not_a_traceback(main, device, expected, capsys):
    args = ["--src", "a", "--ref", "b"] if main is evaluate_main else []
    with pytest.raises(SystemExit) as info:
        main(["some.ckpt", *args, "--device", device])
    assert info.value.code == 2
    assert expected in capsys.readouterr().err


def test_batch_size_and_max_tokens_are_one_choice(capsys):
    with pytest.raises(SystemExit):
        translate_main(["some.ckpt", "--batch-size", "8", "--max-tokens", "4000"])
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("main", [translate_main, evaluate_main])
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--ensemble", "b.ckpt", "--weights", "1"], "--weights: 1 given for 2 ensemble members"),
        (["--weights", "1", "2"], "--weights: 2 given for 1 ensemble members"),
        (["--ensemble", "b.ckpt", "--engine", "ct2"], "--ensemble decodes with --engine torch"),
    ],
)
def test_ensemble_options_that_cannot_work_are_refused_before_loading(main, args, expected, capsys):
    test_set = ["--src", "a", "--ref", "b"] if main is evaluate_main else []
    with pytest.raises(SystemExit) as info:
        main(["some.ckpt", *test_set, *args])
    assert info.value.code == 2
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--top-k", "5", "--seed", "1"], "--top-k --seed shape sampling: add --sample N"),
        (["--sample", "2", "--n-best", "2"], "--n-best is beam search's"),
        (["--sample", "2", "--engine", "ct2"], "--sample decodes with --engine torch, not ct2"),
        (["--prefix", "p.txt", "--engine", "ct2"], "--prefix decodes with --engine torch"),
        (["--prefix-column", "--engine", "ct2"], "--prefix-column decodes with --engine torch"),
        (["--prefix", "p.txt", "--prefix-column"], "not allowed with argument --prefix"),
        (["--prefix-column", "--constraints", "c.tsv"], "not with --sample or a prefix"),
        (["--shards", "2", "--engine", "ct2"], "--shards runs our search in each process"),
    ],
)
def test_sampling_and_prefix_options_that_cannot_work_are_refused(args, expected, capsys):
    with pytest.raises(SystemExit) as info:
        translate_main(["some.ckpt", *args])
    assert info.value.code == 2
    assert expected in capsys.readouterr().err


def test_a_prefix_file_of_another_length_is_refused_before_loading(tmp_path):
    (tmp_path / "in.txt").write_text("one\ntwo\nthree\n")
    (tmp_path / "prefix.txt").write_text("eins\n\n")
    args = [str(tmp_path / "in.txt"), "--prefix", str(tmp_path / "prefix.txt")]
    with pytest.raises(SystemExit, match=r"prefix.txt has 2 lines but .*in.txt has 3"):
        translate_main([str(tmp_path / "missing.ckpt"), *args])  # no checkpoint read yet


def test_an_input_line_without_its_prefix_column_is_refused_before_loading(tmp_path):
    (tmp_path / "in.tsv").write_text("one\teins\ntwo\t\nthree\n")
    args = [str(tmp_path / "in.tsv"), "--prefix-column"]
    with pytest.raises(SystemExit, match=r"in.tsv, line 3: 1 tab-separated column\(s\), not"):
        translate_main([str(tmp_path / "missing.ckpt"), *args])  # no checkpoint read yet


def test_a_constraint_on_a_line_the_input_lacks_is_refused_before_loading(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("one\ntwo\n")
    for text, expected in [
        ("1\teins\n3\tdrei\n", r"constraints.tsv, line 2: constrains input line 3, but the input"),
        ("x\teins\n", r"constraints.tsv, line 1: starts with 'x', not the number"),
    ]:
        (tmp_path / "constraints.tsv").write_text(text)
        args = [str(tmp_path / "in.txt"), "--constraints", str(tmp_path / "constraints.tsv")]
        with pytest.raises(SystemExit, match=expected):
            translate_main([str(tmp_path / "missing.ckpt"), *args])
    with pytest.raises(SystemExit):
        translate_main(["some.ckpt", "--constraints", "c.tsv", "--sample", "2"])
    assert "--constraints steer beam search: not with --sample" in capsys.readouterr().err


def test_a_prefix_too_long_is_refused_before_the_first_line_naming_line_and_limit(tmp_path, capsys):
    tokenizer = BPETokenizer.train(WORDS, vocab_size=280, min_frequency=1)
    ckpt = str(write_checkpoint(tmp_path / "m.ckpt", tokenizer, max_positions=24))
    (tmp_path / "in.txt").write_text("one two\nthree\nfour five\n")
    common = [ckpt, str(tmp_path / "in.txt"), "--batch-size", "1", "--max-len-b", "2"]
    for prefix, expected in [
        ("one two " * 4, r"line 3: its prefix has \d+ tokens, more than the \d+ its translation "
         r"may have \(source length \+ max_len_b 2\); shorten the prefix or raise max_len_b"),
        (" ".join(["sieben"] * 9), r"line 3: its prefix has \d+ tokens, more than the model's 24 "
         r"positions hold; shorten the prefix$"),
    ]:  # fmt: skip
        (tmp_path / "p.txt").write_text(f"\n\n{prefix}\n")
        with pytest.raises(SystemExit, match=expected):
            translate_main([*common, "--prefix", str(tmp_path / "p.txt")])
        assert capsys.readouterr().out == ""  # lines 1 and 2 were not written
        (tmp_path / "in.tsv").write_text(f"one two\t\nthree\t\nfour five\t{prefix}\n")
        with pytest.raises(SystemExit, match=expected):
            translate_main([ckpt, str(tmp_path / "in.tsv"), *common[2:], "--prefix-column"])
        assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--mbr", "1"], "argument --mbr: must be an integer >= 2, got '1'"),
        (["--mbr", "4", "--n-best", "5", "--beam-size", "8"], "--n-best 5 exceeds --mbr 4"),
        (["--mbr", "4", "--mbr-utility", "meteor"], "argument --mbr-utility: invalid choice"),
        (["--mbr", "4", "--sample", "2"], "--mbr samples its own pseudo-references"),
        (["--mbr-utility", "bleu"], "--mbr-utility choose how MBR decodes: add --mbr N"),
        (["--epsilon", "0.02"], "--epsilon shape sampling: add --sample N or --mbr N"),
        (["--mbr", "4", "--epsilon", "1"], "argument --epsilon: must be a number in [0, 1)"),
        (["--mbr", "4", "--engine", "ct2"], "--mbr decodes with --engine torch"),
        (["--mbr", "4", "--constraints", "c.tsv"], "--constraints steer beam search"),
    ],
)
def test_mbr_options_that_cannot_work_are_refused_in_one_line(args, expected, capsys):
    with pytest.raises(SystemExit) as info:
        translate_main(["some.ckpt", *args])
    assert info.value.code == 2
    assert expected in capsys.readouterr().err.splitlines()[-1]


def test_mbr_prints_one_line_an_input_the_same_for_the_same_seed(tmp_path, capsys):
    tokenizer = BPETokenizer.train(WORDS, vocab_size=280, min_frequency=1)
    ckpt = str(write_checkpoint(tmp_path / "m.ckpt", tokenizer))
    (tmp_path / "in.txt").write_text("one two\n\nthree four\n")
    common = [ckpt, str(tmp_path / "in.txt"), "--max-len-b", "3", "--threads", "1"]
    outputs = []
    for seed in ("1", "1", "2"):
        translate_main([*common, "--mbr", "4", "--epsilon", "0.01", "--seed", seed])
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].split("\n")) == 4
    assert outputs[2] != outputs[0]
    translate_main([*common, "--mbr", "3", "--mbr-candidates", "both", "--n-best", "2"])
    rows = capsys.readouterr().out.split("\n")[:-1]
    assert [row.split("\t")[0] for row in rows] == ["0", "0", "1", "1", "2", "2"]


def test_evaluate_reports_chrf_plus_plus_and_ter_and_writes_sentence_scores(tmp_path, capsys):
    tokenizer = BPETokenizer.train(WORDS, vocab_size=280, min_frequency=1)
    ckpt = str(write_checkpoint(tmp_path / "m.ckpt", tokenizer))
    (tmp_path / "src.txt").write_text("one two\nthree four\nfünf\n")
    references = ["eins zwei", "drei vier .", "five"]
    (tmp_path / "ref.txt").write_text("\n".join(references) + "\n")
    files = ["--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt")]
    table = tmp_path / "scores.tsv"
    options = ["--output-dir", str(tmp_path / "eval"), "--max-len-b", "3", "--threads", "1"]
    evaluate_main([ckpt, *files, *options])  # the outputs, to make references near them
    first, second, _ = (tmp_path / "eval" / "hypotheses.txt").read_text().split("\n")[:3]
    references = [first, second[: len(second) // 2] + " x", "five"]  # 100, some, none
    (tmp_path / "ref.txt").write_text("\n".join(references) + "\n")
    capsys.readouterr()
    evaluate_main([ckpt, *files, *options, "--sentence-scores", str(table)])
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    hypotheses = (tmp_path / "eval" / "hypotheses.txt").read_text().split("\n")[:-1]
    for name, metric in [("chrF2++", CHRF(word_order=2)), ("TER", TER())]:
        expected = metric.corpus_score(hypotheses, [references])
        assert report[name]["score"] == expected.score
        assert report[name]["signature"] == str(metric.get_signature())
        assert f"{expected}\n  signature: {metric.get_signature()}" in out
    rows = [line.split("\t") for line in table.read_text().splitlines()]
    assert rows[0] == ["line", "BLEU", "chrF", "chrF++", "TER"]
    for row, h, r in zip(rows[1:], hypotheses, references, strict=True):
        expected = [
            sacrebleu.sentence_bleu(h, [r]).score,
            sacrebleu.sentence_chrf(h, [r]).score,
            sacrebleu.sentence_chrf(h, [r], word_order=2).score,
            sacrebleu.sentence_ter(h, [r]).score,
        ]
        assert [float(x) for x in row[1:]] == pytest.approx(expected, abs=5e-5)
    assert float(rows[1][1]) == 100.0 and 0 < float(rows[2][2]) < 100
    assert [row[0] for row in rows[1:]] == ["1", "2", "3"]
    with pytest.raises(SystemExit):
        evaluate_main([ckpt, *files, "--alpha", "0.6", "1", "--sentence-scores", str(table)])
    assert "--sentence-scores writes one setting's scores" in capsys.readouterr().err
