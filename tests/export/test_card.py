"""The model card tells what the run's files hold, and says what is unknown."""

import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.export.card import model_card, run_record

CONFIG = """\
data:
  corpus:
    _target_: transformer_nmt.data.bitext.BitextCorpus
    path: ${oc.env:NMT_DATA_DIR}/multi30k
  src_lang: de
  tgt_lang: en
  vocab_size: 8000
trainer:
  accelerator: cpu
  devices: 1
  precision: 32-true
"""
LOG = """\
[2026-01-02 10:00:00,001][transformer_nmt.train][INFO] - Model: 1 parameters
an untimed line
[2026-01-02 10:59:30,500][transformer_nmt.train][INFO] - done
"""
SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"


@pytest.fixture
def run(tmp_path) -> Path:
    """A run folder as `train.py` and `nmt-evaluate` leave it."""
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    (tmp_path / "checkpoints").mkdir()
    path = write_checkpoint(tmp_path / "checkpoints" / "last.ckpt", tokenizer, step=1200)
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(CONFIG)
    overrides = ["experiment=multi30k_de_en", "model.dropout=0.3", "trainer.max_time='00:01:00:00'"]
    (tmp_path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (tmp_path / "train.log").write_text(LOG)
    report = {
        "src": "test_2016_flickr.de.gz",
        "sentences": 1000,
        "search": {"beam_size": 4},
        "BLEU": {"score": 38.123, "signature": SIGNATURE},
        "chrF2": {"score": 60.5, "signature": "nrefs:1|nc:6|nw:0"},
    }
    (tmp_path / "checkpoints" / "evaluation").mkdir()
    (tmp_path / "checkpoints" / "evaluation" / "report.json").write_text(json.dumps(report))
    return path


def test_the_card_holds_data_command_time_hardware_and_scores(run, monkeypatch):
    monkeypatch.delenv("NMT_DATA_DIR", raising=False)  # set, the card would show its value
    model, _ = load_checkpoint(run)
    card = str(model_card(model, run_record([run]), "a test format", "## Usage\n\nrun it", "lib"))
    expected = [
        # The checkpoint lacks the datamodule's languages; the run's Hydra config has them.
        "language:\n- de\n- en",
        "# transformer-nmt de → en",
        "`transformer_nmt.data.bitext.BitextCorpus` (path=${oc.env:NMT_DATA_DIR}/multi30k)",
        "python train.py experiment=multi30k_de_en model.dropout=0.3 "
        "'trainer.max_time='\"'\"'00:01:00:00'\"'\"''",
        "training time: 60 min",
        "hardware: accelerator=cpu, devices=1, precision=32-true",
        f"- BLEU 38.12, `{SIGNATURE}`",
        "- chrF2 60.50, `nrefs:1|nc:6|nw:0`",
        "last.ckpt, step 1200",
        f"{sum(p.numel() for p in model.parameters()):,} parameters: N=1, d_model=16",
        "## Usage\n\nrun it",
        "license: mit",
        "MIT, the license of transformer-nmt",
    ]
    for text in expected:
        assert text in card, text


def test_the_card_takes_precision_and_update_from_the_checkpoints_run_plan(run):
    (run.parent.parent / ".hydra" / "config.yaml").write_text(CONFIG.replace("32-true", "auto"))
    checkpoint = torch.load(run, weights_only=True)
    checkpoint["run_plan"] = {
        "precision": "bf16-mixed", "world_size": 2, "accumulate_grad_batches": 3,
        "max_tokens": 4167, "tokens_per_update": 25_002,
    }  # fmt: skip
    torch.save(checkpoint, run)
    model, _ = load_checkpoint(run)
    card = str(model_card(model, run_record([run]), "a test format", "", "lib"))
    assert "hardware: accelerator=cpu, devices=1, precision=bf16-mixed" in card
    assert "update: 2 process(es) x 3 batch(es) of 4167 tokens a side (25002 at most)" in card


def test_a_lone_checkpoint_gets_a_card_saying_what_is_unknown(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "model.ckpt", tokenizer)
    model, _ = load_checkpoint(path)
    card = str(model_card(model, run_record([path]), "a test format", "## Usage", "lib"))
    for text in ("# transformer-nmt ? → ?", "data: unknown", "training time: unknown",
                 "hardware: unknown", "command: unknown", "No `nmt-evaluate` report"):  # fmt: skip
        assert text in card, text


def test_the_card_written_loads_back_with_huggingface_hub_and_gives_the_bleu(run, tmp_path):
    model, _ = load_checkpoint(run)
    card = model_card(model, run_record([run]), "a test format", "## Usage", "transformers")
    (tmp_path / "README.md").write_text(str(card), encoding="utf-8")
    loaded = ModelCard.load(tmp_path / "README.md")
    data = loaded.data
    assert (data.license, data.pipeline_tag, data.library_name) == (
        "mit",
        "translation",
        "transformers",
    )
    assert data.language == ["de", "en"] and data.model_name == "transformer-nmt de → en"
    bleu, chrf = data.eval_results
    assert (bleu.metric_type, bleu.metric_value, bleu.metric_config) == ("bleu", 38.12, SIGNATURE)
    assert (chrf.metric_type, chrf.metric_value) == ("chrf", 60.5)
    assert (bleu.task_type, bleu.dataset_type) == ("translation", "test_2016_flickr.de.gz")


def test_a_hub_corpus_is_named_as_the_cards_dataset(run):
    config = run.parent.parent / ".hydra" / "config.yaml"
    config.write_text(
        CONFIG.replace("bitext.BitextCorpus", "hub.HubCorpus").replace(
            "path: ${oc.env:NMT_DATA_DIR}/multi30k", "name: bentrevett/multi30k"
        )
    )
    model, _ = load_checkpoint(run)
    card = model_card(model, run_record([run]), "a test format", "## Usage", "transformers")
    assert card.data.datasets == ["bentrevett/multi30k"]
