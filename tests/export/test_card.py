"""The model card tells what the run's files hold, and says what is unknown."""

import json
from pathlib import Path

import pytest

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
    card = model_card(model, run_record([run]), "a test format", "## Usage\n\nrun it")
    expected = [
        # The checkpoint lacks the datamodule's languages; the run's Hydra config has them.
        'language: ["de", "en"]',
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
        "# license: left for the model's owner",
    ]
    for text in expected:
        assert text in card, text


def test_a_lone_checkpoint_gets_a_card_saying_what_is_unknown(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    path = write_checkpoint(tmp_path / "model.ckpt", tokenizer)
    model, _ = load_checkpoint(path)
    card = model_card(model, run_record([path]), "a test format", "## Usage")
    for text in ("# transformer-nmt ? → ?", "data: unknown", "training time: unknown",
                 "hardware: unknown", "command: unknown", "No `nmt-evaluate` report"):  # fmt: skip
        assert text in card, text
