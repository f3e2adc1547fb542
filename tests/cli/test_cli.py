"""nmt-translate, nmt-evaluate and nmt-average run as a user runs them, on a toy checkpoint."""

import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import transformer_nmt
from helpers.hydra_compose import compose_train
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.cli.score import main as score_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.evaluation.corpus_scores import score
from transformer_nmt.evaluation.significance import as_records, paired_test
from transformer_nmt.inference.alignment import Alignment
from transformer_nmt.inference.translator import Translator
from transformer_nmt.train import train

pytestmark = pytest.mark.slow
SOURCES = ["three one four", "", "nine two five three", "one"]
REFERENCES = ["drei eins vier", "null", "neun zwei fünf drei", "eins"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    """A folder of checkpoints of one epoch of the toy task."""
    tmp_path = tmp_path_factory.mktemp("toy")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation
    overrides = ["trainer.max_epochs=1", "+trainer.limit_train_batches=5", "data.corpus.num_val=8"]
    # A periodic checkpoint at the epoch's end, for --average-last.
    overrides += ["~callbacks.attention_maps", "callbacks.checkpoints.every_n_steps=5"]
    train(compose_train(tmp_path, ["experiment=toy", "logger=none", *overrides]))
    torch.set_num_threads(threads)
    return tmp_path / "run" / "checkpoints"


def run(module: str, *args: str, stdin: str | None = None, check: bool = True):
    # The package the tests import, wherever it is installed from.
    env = {**os.environ, "PYTHONPATH": str(Path(transformer_nmt.__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-m", f"transformer_nmt.cli.{module}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=check,
        timeout=300,
    )


def test_translate_a_file_one_line_per_input_line(checkpoints, tmp_path):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    out = run(
        "translate", str(checkpoints / "last.ckpt"), str(tmp_path / "src.en"), "--threads", "1"
    )
    assert len(out.stdout.splitlines()) == len(SOURCES)
    # Off a terminal, progress is log lines, the last one its count and rate.
    assert f"translating: done, {len(SOURCES)} sentences in" in out.stderr


def test_an_input_after_ensemble_members_is_the_input_not_a_member(checkpoints, tmp_path):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    ckpt, src = str(checkpoints / "last.ckpt"), str(tmp_path / "src.en")
    alone = run("translate", ckpt, src, "--threads", "1")
    both = run("translate", ckpt, "--ensemble", ckpt, src, "--threads", "1")
    assert both.stdout == alone.stdout and len(both.stdout.splitlines()) == len(SOURCES)


def test_translate_stdin_n_best(checkpoints):
    args = (
        "--threads",
        "1",
        "--beam-size",
        "3",
        "--n-best",
        "2",
        "--penalty",
        "fairseq",
        "--batch-size",
        "2",
    )
    out = run("translate", str(checkpoints / "last.ckpt"), *args, stdin="\n".join(SOURCES))
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    assert [int(row[0]) for row in rows] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all(float(row[1]) <= 0 for row in rows)


def test_evaluate_the_average_of_the_last_checkpoints(checkpoints, tmp_path):
    (tmp_path / "src.en.gz").write_bytes(gzip.compress(("\n".join(SOURCES) + "\n").encode()))
    (tmp_path / "ref.de").write_text("\n".join(REFERENCES) + "\n")
    out = run(
        "evaluate",
        str(checkpoints),
        "--average-last",
        "1",
        "--src",
        str(tmp_path / "src.en.gz"),
        "--ref",
        str(tmp_path / "ref.de"),
        "--output-dir",
        str(tmp_path / "eval"),
        "--threads",
        "1",
        "--device",
        "cpu",
    )
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    hypotheses = (tmp_path / "eval" / "hypotheses.txt").read_text().splitlines()
    assert len(hypotheses) == len(SOURCES) == report["sentences"]
    assert report["BLEU"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "nc:6|nw:0" in report["chrF2"]["signature"]
    assert report["BLEU"]["signature"] in out.stdout and "chrF2 = " in out.stdout


def test_evaluate_a_split_of_a_data_config_scores_as_the_same_files(checkpoints, tmp_path):
    # A local copy shaped like bentrevett/multi30k; the blank source is dropped by the cleaning.
    pairs = [(s, r) for s, r in zip(SOURCES, REFERENCES, strict=True) if s]
    hub = tmp_path / "hub"
    hub.mkdir()
    for split in ("train", "val", "test"):
        rows = [json.dumps({"en": en, "de": de}, ensure_ascii=False) for en, de in pairs]
        (hub / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "src.en").write_text("".join(f"{s}\n" for s, _ in pairs))
    (tmp_path / "ref.de").write_text("".join(f"{r}\n" for _, r in pairs))
    common = [str(checkpoints / "last.ckpt"), "--beam-size", "2", "--device", "cpu"]
    overrides = [
        f"data.corpus.name={hub}",
        f"+data.corpus.cache_dir={tmp_path / 'hf-cache'}",
        "data.src_lang=en",
        "data.tgt_lang=de",
    ]
    evaluate_main(
        [
            *common,
            "--data",
            "multi30k_hub",
            "--split",
            "test",
            *overrides,
            "--output-dir",
            str(tmp_path / "data"),
        ]
    )
    evaluate_main(
        [
            *common,
            "--src",
            str(tmp_path / "src.en"),
            "--ref",
            str(tmp_path / "ref.de"),
            "--output-dir",
            str(tmp_path / "files"),
        ]
    )

    by_data = json.loads((tmp_path / "data" / "report.json").read_text())
    by_files = json.loads((tmp_path / "files" / "report.json").read_text())
    assert by_data["sentences"] == by_files["sentences"] == len(pairs)
    assert by_data["split"] == "test" and by_data["langs"] == ["en", "de"]
    for name in ("BLEU", "BLEU-lc", "chrF2"):
        assert by_data[name]["score"] == pytest.approx(by_files[name]["score"]), name
    hyps = (tmp_path / "data" / "hypotheses.txt").read_text()
    assert hyps == (tmp_path / "files" / "hypotheses.txt").read_text()


def test_a_grid_cell_is_the_evaluation_of_its_setting_alone(checkpoints, tmp_path, capsys):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    (tmp_path / "ref.de").write_text("\n".join(REFERENCES) + "\n")
    files = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de")]
    grid = ["--beam-size", "1", "3", "--alpha", "0.6", "1.5", "--output-dir", str(tmp_path / "g")]
    evaluate_main([str(checkpoints), "--average-last", "1", *files, *grid])
    table = capsys.readouterr().out
    setting = ["--beam-size", "3", "--alpha", "1.5", "--output-dir", str(tmp_path / "one")]
    evaluate_main([str(checkpoints), "--average-last", "1", *files, *setting])

    cells = json.loads((tmp_path / "g" / "grid.json").read_text())
    names = ["avg1_beam1_alpha0.6", "avg1_beam1_alpha1.5", "avg1_beam3_alpha0.6"]
    assert [cell["folder"] for cell in cells] == [*names, "avg1_beam3_alpha1.5"]
    for cell in cells:
        report = json.loads((tmp_path / "g" / cell["folder"] / "report.json").read_text())
        assert report["search"]["beam_size"] == cell["beam_size"]
        assert report["search"]["alpha"] == cell["alpha"]
        assert report["BLEU"] == cell["BLEU"]
        assert f"| 1 | {cell['beam_size']} | {cell['alpha']:g} |" in table
    alone = json.loads((tmp_path / "one" / "report.json").read_text())
    assert alone["BLEU"] == cells[-1]["BLEU"] and alone["chrF2"] == cells[-1]["chrF2"]
    hyps = (tmp_path / "g" / "avg1_beam3_alpha1.5" / "hypotheses.txt").read_text()
    assert hyps == (tmp_path / "one" / "hypotheses.txt").read_text()
    assert not (tmp_path / "g" / "report.json").exists()  # only cells, each in its folder


def test_a_grid_with_an_average_the_folder_cannot_give_stops_before_decoding(
    checkpoints, tmp_path, capsys
):
    (tmp_path / "src.en").write_text("one\n")
    (tmp_path / "ref.de").write_text("eins\n")
    files = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de")]
    with pytest.raises(SystemExit, match="fewer than the 50 to average"):
        evaluate_main(
            [str(checkpoints), "--average-last", "1", "50", *files, "--output-dir", str(tmp_path)]
        )
    assert not list(tmp_path.glob("avg*"))


def test_overrides_without_data_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        evaluate_main([str(tmp_path), "data.src_lang=de", "--src", "a", "--ref", "b"])


def test_lowercased_bleu_ignores_only_case():
    report = score(["A Dog runs on the grass ."], ["a dog runs on the grass ."])
    assert report["BLEU-lc"]["score"] == pytest.approx(100.0)
    assert report["BLEU"]["score"] < 70
    assert "case:lc" in report["BLEU-lc"]["signature"]


def test_average_writes_a_checkpoint_that_loads_weights_only(checkpoints, tmp_path):
    files = [str(p) for p in sorted(checkpoints.glob("*.ckpt"))]
    run("average", *files, "--output", str(tmp_path / "avg.ckpt"))
    averaged, _ = load_checkpoint(tmp_path / "avg.ckpt")
    # One epoch: every file holds the same weights, so their average is them.
    original, _ = load_checkpoint(files[0])
    for key, t in original.state_dict().items():
        assert torch.equal(averaged.state_dict()[key], t), key


def test_a_refused_checkpoint_is_an_error_message_not_a_traceback(tmp_path, capsys):
    torch.save({"state_dict": {}}, tmp_path / "bad.ckpt")
    with pytest.raises(SystemExit, match="not a transformer-nmt checkpoint"):
        translate_main([str(tmp_path / "bad.ckpt"), str(tmp_path / "missing.txt")])


def test_evaluate_in_token_batches_gives_the_sentence_batches_hypotheses(checkpoints, tmp_path):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    (tmp_path / "ref.de").write_text("\n".join(REFERENCES) + "\n")
    files = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de")]
    ckpt, common = str(checkpoints / "last.ckpt"), ["--device", "cpu", "--threads", "1"]
    evaluate_main([ckpt, *files, *common, "--output-dir", str(tmp_path / "sentences")])
    evaluate_main([ckpt, *files, *common, "--max-tokens", "6", "--output-dir", str(tmp_path / "t")])
    mixed = [*common, "--max-tokens", "6", "--dtype", "bf16-mixed"]
    evaluate_main([ckpt, *files, *mixed, "--output-dir", str(tmp_path / "bf16")])
    hypotheses = {
        name: (tmp_path / name / "hypotheses.txt").read_text() for name in ("sentences", "t")
    }
    assert hypotheses["sentences"] == hypotheses["t"]
    report = json.loads((tmp_path / "bf16" / "report.json").read_text())
    assert report["search"]["max_tokens"] == 6 and report["dtype"] == "bf16-mixed"
    assert len((tmp_path / "bf16" / "hypotheses.txt").read_text().splitlines()) == len(SOURCES)


def test_evaluate_an_ensemble_of_two_identical_checkpoints_as_the_one(checkpoints, tmp_path):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    (tmp_path / "ref.de").write_text("\n".join(REFERENCES) + "\n")
    files = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de")]
    ckpt, common = str(checkpoints / "last.ckpt"), ["--device", "cpu", "--threads", "1"]
    evaluate_main([ckpt, *files, *common, "--output-dir", str(tmp_path / "one")])
    pair = ["--ensemble", ckpt, "--weights", "1", "3", "--output-dir", str(tmp_path / "two")]
    evaluate_main([ckpt, *files, *common, *pair])
    hypotheses = [(tmp_path / name / "hypotheses.txt").read_text() for name in ("one", "two")]
    assert hypotheses[0] == hypotheses[1]
    report = json.loads((tmp_path / "two" / "report.json").read_text())
    assert report["ensemble"] == [ckpt] and report["weights"] == [1, 3]


def test_translate_samples_reproducibly_and_keeps_prefixes(
    checkpoints, tmp_path, capsys, monkeypatch
):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    (tmp_path / "prefix.de").write_text("drei eins\n\nneun\n\n")
    common = [str(checkpoints / "last.ckpt"), str(tmp_path / "src.en"), "--threads", "1"]
    sample = ["--sample", "3", "--top-p", "0.9", "--temperature", "1.5", "--seed", "4"]
    outputs = []
    for plan in (["--batch-size", "1"], ["--max-tokens", "8"]):
        translate_main([*common, *sample, *plan])
        outputs.append(capsys.readouterr().out)
    # The same samples; scores within float rounding of batches padded differently.
    texts = [re.sub(r"^(\d+)\t-?\d+\.\d{4}\t", r"\1\t", out, flags=re.M) for out in outputs]
    assert texts[0] == texts[1]
    assert re.findall(r"^(\d+)\t-?\d+\.\d{4}\t", outputs[0], flags=re.M) == [
        str(i) for i in range(len(SOURCES)) for _ in range(3)
    ]
    translate_main([*common, "--prefix", str(tmp_path / "prefix.de")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("drei eins") and lines[2].startswith("neun")
    # The same prefixes as a column of the input: the same translations.
    prefixes = (tmp_path / "prefix.de").read_text().splitlines()
    rows = [f"{s}\t{p}\n" for s, p in zip(SOURCES, prefixes, strict=True)]
    (tmp_path / "src.tsv").write_text("".join(rows))
    column = [str(tmp_path / "src.tsv"), "--prefix-column", "--threads", "1"]
    translate_main([str(checkpoints / "last.ckpt"), *column])
    assert capsys.readouterr().out.splitlines() == lines
    # From stdin, read a line at a time, a line without the column stops there, its
    # predecessors translated.
    stdin = io.BytesIO(b"".join([rows[0].encode(), b"nine two\n"]))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    with pytest.raises(SystemExit, match="stdin, line 2: 1 tab-separated column"):
        translate_main([str(checkpoints / "last.ckpt"), *column[1:], "--batch-size", "1"])
    assert capsys.readouterr().out.splitlines() == lines[:1]


def test_score_pairs_n_best_lists_and_the_reverse_direction(checkpoints, tmp_path, capsys):
    sources, references = SOURCES[2:], REFERENCES[2:]
    (tmp_path / "src.en").write_text("\n".join(sources) + "\n")
    (tmp_path / "ref.de").write_text("\n".join(references) + "\n")
    (tmp_path / "pairs.tsv").write_text(
        "".join(f"{s}\t{r}\n" for s, r in zip(sources, references, strict=True))
    )
    ckpt = str(checkpoints / "last.ckpt")
    files = ["--src", str(tmp_path / "src.en"), "--tgt", str(tmp_path / "ref.de")]
    score_main([ckpt, *files, "--per-token", "--align"])
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    model, tokenizer = load_checkpoint(checkpoints / "last.ckpt")
    expected = Translator(model, tokenizer, device="cpu").score(sources, references)
    assert [float(row[0]) for row in rows] == pytest.approx([s.score for s in expected], abs=1e-4)
    for row, reference in zip(rows, references, strict=True):
        assert len(row[2].split()) == len(tokenizer.encode_batch([reference])[0]) + 1  # EOS
        assert {int(pair.split("-")[1]) for pair in row[3].split()} <= set(
            range(len(reference.split()))
        )
    score_main([ckpt, "--tsv", str(tmp_path / "pairs.tsv")])
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == [
        row[0] for row in rows
    ]
    score_main(
        [ckpt, "--src", str(tmp_path / "ref.de"), "--tgt", str(tmp_path / "src.en"), "--reverse"]
    )
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == [
        row[0] for row in rows
    ]
    translate_main([ckpt, str(tmp_path / "src.en"), "--beam-size", "2", "--n-best", "2"])
    (tmp_path / "nbest.txt").write_text(capsys.readouterr().out)
    score_main([ckpt, "--src", str(tmp_path / "src.en"), "--n-best", str(tmp_path / "nbest.txt")])
    scored = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    nbest = [line.split("\t") for line in (tmp_path / "nbest.txt").read_text().splitlines()]
    assert [row[:3] for row in scored] == nbest  # the n-best's columns, then the scores
    assert len(scored) == 2 * len(sources) and all(len(row) == 5 for row in scored)
    # A second model's scores (here the same model's) follow the first's: features to rescore.
    (tmp_path / "fwd.txt").write_text("".join("\t".join(row) + "\n" for row in scored))
    score_main([ckpt, "--src", str(tmp_path / "src.en"), "--n-best", str(tmp_path / "fwd.txt")])
    twice = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [row[:5] for row in twice] == scored and [row[5] for row in twice] == [
        row[3] for row in scored
    ]


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_evaluate_compares_files_and_checkpoints_as_sacrebleus_command_line(
    checkpoints, tmp_path, capsys, test
):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    (tmp_path / "ref.de").write_text("\n".join(REFERENCES) + "\n")
    (tmp_path / "other.de").write_text("drei eins\nnull\nneun zwei\neins\n")
    files = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de")]
    periodic = min(checkpoints.glob("step*.ckpt"))  # another system: an earlier checkpoint
    others = [str(tmp_path / "other.de"), str(periodic)]  # a file (the baseline), a checkpoint
    paired = ["--systems", *others, "--paired", test, "--paired-n", "100"]
    out_dir = tmp_path / "eval"
    ckpt = str(checkpoints / "last.ckpt")
    evaluate_main([ckpt, *files, *paired, "--threads", "1", "--output-dir", str(out_dir)])
    assert (
        f"with 100 {'resampling trials' if test == 'bs' else 'trials'}" in capsys.readouterr().out
    )
    report = json.loads((out_dir / "significance.json").read_text())
    decoded = out_dir / "systems" / f"2_{periodic.stem}.txt"
    outputs = [tmp_path / "other.de", decoded, out_dir / "hypotheses.txt"]
    assert [r["system"] for r in report["systems"]] == [
        f"Baseline: {others[0]}",
        others[1],
        "beam4_alpha0.6",
    ]
    # sacreBLEU on the three systems' outputs: the same numbers, from Python and as its command
    # line prints them (its table's names are the files').
    texts = [path.read_text().splitlines() for path in outputs]
    names = [r["system"].removeprefix("Baseline: ") for r in report["systems"]]
    _, expected = paired_test(list(zip(names, texts, strict=True)), REFERENCES, test, 100)
    assert report["systems"] == as_records(expected)
    command = [
        sys.executable,
        "-m",
        "sacrebleu",
        str(tmp_path / "ref.de"),
        "-i",
        *map(str, outputs),
    ]
    command += [f"--paired-{test}", f"--paired-{test}-n", "100", "--no-color", "-f", "text"]
    # The command line computes chrF or chrF++ in one call: BLEU, chrF2 and TER, then chrF2++.
    cli = [
        table_cells(
            subprocess.run(
                command + metrics, capture_output=True, text=True, check=True, timeout=120
            ).stdout
        )
        for metrics in (["-m", "bleu", "chrf", "ter"], ["-m", "chrf", "--chrf-word-order", "2"])
    ]
    *rows, signatures = table_cells((out_dir / "significance.txt").read_text())
    assert rows == [a[:2] + b + a[2:] for a, b in zip(cli[0][:-1], cli[1][:-1], strict=True)]
    assert sorted(signatures) == sorted(cli[0][-1] + cli[1][-1])
    assert report["systems"][0]["BLEU"]["p_value"] is None
    metrics = ("BLEU", "chrF2", "chrF2++", "TER")
    assert all(r[m]["p_value"] is not None for r in report["systems"][1:] for m in metrics)
    assert all((r["BLEU"]["ci"] is not None) == (test == "bs") for r in report["systems"])


def table_cells(text: str) -> list[list[str]]:
    """sacreBLEU's text table and signatures without the system names: each row's metric cells."""
    rows = [line.split("│")[2:-1] for line in text.splitlines() if "│" in line]
    signatures = [
        line for line in text.splitlines() if line.startswith((" - BLEU", " - chrF2", " - TER"))
    ]
    return [[cell.strip() for cell in row] for row in rows] + [signatures]


def test_evaluate_refuses_a_comparison_it_cannot_make_before_decoding(tmp_path, capsys):
    (tmp_path / "src.en").write_text("one\ntwo\n")
    (tmp_path / "short.de").write_text("eins\n")
    files = ["--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "src.en")]
    for args, expected in [
        (["--paired", "bs"], "--paired compares systems: add --systems FILE|CKPT"),
        (["--systems", "x.de"], "--systems and --paired-n are for --paired"),
        (
            ["--systems", "x.ckpt", "--paired", "bs", "--beam-size", "1", "4"],
            "a .ckpt of --systems decodes with this call's search: give one --beam-size",
        ),
    ]:
        with pytest.raises(SystemExit):
            evaluate_main([str(tmp_path), *files, *args])
        assert expected in capsys.readouterr().err
    short = ["--systems", str(tmp_path / "short.de"), "--paired", "ar"]
    torch.save({"state_dict": {}}, tmp_path / "some.ckpt")
    with pytest.raises(SystemExit, match="short.de has 1 lines for 2 references"):
        evaluate_main([str(tmp_path / "some.ckpt"), *files, *short])
    missing = ["--systems", str(tmp_path / "missing.ckpt"), "--paired", "bs"]
    with pytest.raises(SystemExit, match="missing.ckpt"):  # the unreadable some.ckpt not loaded
        evaluate_main([str(tmp_path / "some.ckpt"), *files, *missing])


def test_translate_with_terminology_constraints(checkpoints, tmp_path, capsys):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    (tmp_path / "terms.tsv").write_text("1\tvier\n4\tzwei drei\tfünf\n")
    ckpt = str(checkpoints / "last.ckpt")
    translate_main([ckpt, str(tmp_path / "src.en"), "--constraints", str(tmp_path / "terms.tsv")])
    lines = capsys.readouterr().out.split("\n")
    assert " vier" in lines[0] and " zwei drei" in lines[3] and " fünf" in lines[3]


def test_cpu_shards_print_one_process_output_byte_for_byte(checkpoints, tmp_path, capsys, caplog):
    lines = SOURCES * 3  # blank lines among them
    (tmp_path / "src.en").write_text("\n".join(lines) + "\n")
    common = [str(checkpoints / "last.ckpt"), str(tmp_path / "src.en"), "--threads", "1"]
    options = ["--sample", "2", "--max-tokens", "4"]  # chunks of 4 sentences: 3 chunks
    translate_main([*common, *options])
    one = capsys.readouterr().out
    translate_main([*common, *options, "--shards", "2"])
    assert capsys.readouterr().out == one
    assert len(re.findall(r"^\d+\t-?\d+\.\d{4}\t", one, flags=re.M)) == 2 * len(lines)
    assert "translating: started" in caplog.text  # progress logged off a terminal
    (tmp_path / "ref.de").write_text("\n".join(REFERENCES * 3) + "\n")
    pairs = [common[0], "--src", common[1], "--tgt", str(tmp_path / "ref.de"), "--batch-size", "1"]
    score_main([*pairs, "--threads", "1", "--per-token"])
    one = capsys.readouterr().out
    score_main([*pairs, "--threads", "1", "--per-token", "--shards", "2"])
    assert capsys.readouterr().out == one and len(one.splitlines()) == len(lines)


def test_translate_prints_each_translations_alignment(checkpoints, tmp_path, capsys):
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    ckpt, source = str(checkpoints / "last.ckpt"), str(tmp_path / "src.en")
    translate_main([ckpt, source, "--n-best", "2", "--align", "--align-heads", "best"])
    rows = [line.split("\t") for line in capsys.readouterr().out.split("\n")[:-1]]
    rows = [row for row in rows if len(row) == 4]  # an untrained model's text may hold a TAB
    model, tokenizer = load_checkpoint(checkpoints / "last.ckpt")
    translator = Translator(model, tokenizer, device="cpu")
    aligned = translator.score(
        [SOURCES[int(i)] for i, *_ in rows], [text for _, _, text, _ in rows],
        alignment=Alignment(heads="best"),
    )  # fmt: skip
    assert [row[3] for row in rows] == [s.alignment for s in aligned] and len(rows) >= 6
