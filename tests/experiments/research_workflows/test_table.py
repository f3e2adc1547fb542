"""The workflow table scores the checkpoint training's val BLEU chose, and no other."""

import pytest

from experiments.research_workflows.table import best_checkpoint


def test_the_best_checkpoint_is_the_one_named_by_its_val_bleu(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in ("last.ckpt", "step1500.ckpt", "step1200-bleu31.05.ckpt", "step900.ckpt"):
        (folder / name).touch()
    assert best_checkpoint(tmp_path).name == "step1200-bleu31.05.ckpt"
    (folder / "step600-bleu20.00.ckpt").touch()
    with pytest.raises(SystemExit, match="2 best checkpoints"):
        best_checkpoint(tmp_path)
