"""experiments/export/benchmark.py: rows skipped with a reason (bf16 where emulated, generate where
the export refuses the model); a child's record."""

import argparse
import json
from pathlib import Path

import pytest

from experiments.export import benchmark as bench
from helpers.checkpoint_files import SENTENCES, write_checkpoint
from helpers.tiny_models import TINY
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.model import TransformerConfig

POST_NORM = TransformerConfig(**TINY)


def test_bf16_is_skipped_with_a_reason_where_it_is_emulated():
    assert "no native bf16" in bench.skip_reason("ours-bf16", POST_NORM, False, Path("train.en"), 2)
    assert bench.skip_reason("ours-bf16", POST_NORM, True, Path("train.en"), 2) is None
    others = [engine for engine in bench.ENGINES if engine not in ("ours-bf16", *bench.TORCHAO)]
    assert all(
        bench.skip_reason(engine, POST_NORM, False, Path("train.en"), 2) is None
        for engine in others
    )


def test_torchao_is_skipped_with_a_reason_where_it_is_not_installed(monkeypatch):
    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: None)
    for engine in bench.TORCHAO:
        assert "pip install torchao" in bench.skip_reason(engine, POST_NORM, True, None, 2)


def test_the_workers_rows_are_skipped_at_one_thread():
    for engine in bench.WORKERS:
        assert "one worker" in bench.skip_reason(engine, POST_NORM, True, None, 1)
        assert bench.skip_reason(engine, POST_NORM, True, None, 2) is None


def test_the_vmap_row_is_skipped_with_a_reason_without_its_text():
    assert "needs --vmap-from" in bench.skip_reason("ct2-int8-vmap", POST_NORM, True, None, 2)
    assert bench.skip_reason("ct2-int8", POST_NORM, True, None, 2) is None


def test_generate_is_skipped_where_the_hf_export_refuses_the_model():
    pre_norm = TransformerConfig(**{**TINY, "norm_first": True})
    assert "MarianMT is post-norm only" in bench.skip_reason("hf", pre_norm, True, None, 2)
    assert bench.skip_reason("ct2-float32", pre_norm, True, None, 2) is None


def test_a_child_reports_speed_in_sentences_and_output_tokens(tmp_path, capsys):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    checkpoint = write_checkpoint(tmp_path / "last.ckpt", tokenizer)
    sources = ["one two three", "fünf sechs", "zwei"]
    (tmp_path / "src").write_text("".join(f"{s}\n" for s in sources))
    options = dict(threads=1, beam_size=2, alpha=1.0, max_len_b=3, batch_size=2, repeats=3)
    args = argparse.Namespace(
        checkpoint=str(checkpoint),
        src=tmp_path / "src",
        ref=tmp_path / "src",
        vmap_from=None,
        **options,
    )
    for engine in ("ours", "ours-int8", "ours-workers"):
        bench.run_one(argparse.Namespace(**vars(args), engine=engine))
        result = json.loads(capsys.readouterr().out)
        assert result["engine"] == engine
        assert result["output_tokens"] > 0
        seconds, tokens = result["seconds"], result["output_tokens"]
        assert len(result["passes"]) == 3 and seconds == sorted(result["passes"])[1]  # median
        assert result["sentences_per_second"] == pytest.approx(len(sources) / seconds)
        assert result["output_tokens_per_second"] == pytest.approx(tokens / seconds)
