"""`nmt-evaluate --wandb`: the report goes to the W&B run of the checkpoint's training run."""

import json

import pytest
import wandb

from helpers import wandb_records
from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.cli.evaluate import main as evaluate_main
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.runtime.wandb_run import save_run


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """A training run's folder: a checkpoint, and the W&B run it logged to."""
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_SILENT", "true")
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    (tmp_path / "checkpoints").mkdir()
    write_checkpoint(tmp_path / "checkpoints" / "last.ckpt", tokenizer)
    (tmp_path / "src.txt").write_text("one two three\nfour five six\n")
    (tmp_path / "ref.txt").write_text("zwei drei vier\nfünf sechs sieben\n")
    return tmp_path


def evaluate(run_dir, *options: str) -> None:
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    files = ["--src", str(run_dir / "src.txt"), "--ref", str(run_dir / "ref.txt")]
    evaluate_main([str(ckpt), *files, "--beam-size", "1", "--max-len-b", "3", *options])


@pytest.mark.slow
def test_the_report_is_added_to_the_training_runs_w_and_b_run(run_dir):
    save_run(run_dir, "trainrun1", "transformer-nmt")
    evaluate(run_dir, "--wandb")
    wandb.teardown()  # waits for W&B's writer process to finish the run's file
    report = json.loads((run_dir / "checkpoints" / "evaluation" / "report.json").read_text())
    (folder,) = (run_dir / "wandb").glob("offline-run-*-trainrun1")
    (records,) = folder.glob("run-*.wandb")
    assert wandb_records.run_record(records).project == "transformer-nmt"
    summary = wandb_records.summary(records)
    assert summary["evaluate/BLEU"] == report["BLEU"]["score"]
    assert summary["evaluate/chrF2"] == report["chrF2"]["score"]
    logged = summary["evaluate/report"]
    assert logged["BLEU"]["signature"] == report["BLEU"]["signature"]
    assert logged["search"] == report["search"] and logged["search"]["beam_size"] == 1


def test_a_run_that_logged_to_no_w_and_b_run_is_named_before_any_decoding(run_dir):
    with pytest.raises(SystemExit, match=f"--wandb: {run_dir} logged to no W&B run"):
        evaluate(run_dir, "--wandb")
    assert not (run_dir / "checkpoints" / "evaluation").exists()


def test_a_grid_is_refused_with_wandb(run_dir, capsys):
    with pytest.raises(SystemExit):
        evaluate(run_dir, "--wandb", "--alpha", "0.6", "1.0")
    assert "--wandb adds one evaluation to the training run" in capsys.readouterr().err
