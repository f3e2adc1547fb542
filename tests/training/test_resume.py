import torch

from transformer_nmt.training.plan import resume as resume_module
from transformer_nmt.training.plan.resume import ResumePoint


def test_a_fresh_run_answers_every_question_with_nothing(monkeypatch):
    monkeypatch.setattr(resume_module, "read_checkpoint", None)  # reading would fail
    fresh = ResumePoint(None)
    assert not fresh.resuming and fresh.path_problem() is None
    assert fresh.model_config is None and fresh.tokenizer is None
    assert fresh.cpu_precision is None and not fresh.averages_weights
    assert fresh.best_scores == {} and fresh.global_step == 0


def test_the_checkpoint_is_read_once_and_answers_every_question(tmp_path, monkeypatch):
    path = tmp_path / "last.ckpt"
    torch.save(
        {
            "state_dict": {"model.w": torch.ones(2)},
            "global_step": 40,
            "model_config": {"d_model": 64},
            "tokenizer": "{bpe}",
            "precision": {"device": "cpu", "precision": "bf16-mixed"},
            "current_model_state": {"model.w": torch.zeros(2)},
            "callbacks": {
                "CheckpointPolicy{'monitor': 'val/bleu'}": {
                    "monitor": "val/bleu",
                    "best_model_score": torch.tensor(31.5),
                },
                "CheckpointPolicy{'monitor': None}": {"monitor": None, "best_model_score": None},
                "FiniteLoss": {},
            },
        },
        path,
    )
    reads = []
    read = resume_module.read_checkpoint
    monkeypatch.setattr(
        resume_module, "read_checkpoint", lambda *a, **k: reads.append(a) or read(*a, **k)
    )
    point = ResumePoint(path)
    assert point.resuming and point.path == str(path) and point.path_problem() is None
    assert point.model_config == {"d_model": 64} and point.tokenizer == "{bpe}"
    assert point.cpu_precision == "bf16-mixed" and point.averages_weights
    assert point.best_scores == {"val/bleu": 31.5} and point.global_step == 40
    assert len(reads) == 1


def test_a_precision_saved_off_a_cpu_is_no_cpu_precision(tmp_path):
    path = tmp_path / "last.ckpt"
    torch.save({"precision": {"device": "cuda", "precision": "16-mixed"}}, path)
    assert ResumePoint(path).cpu_precision is None
    torch.save({}, path)  # saved before checkpoints kept their precision
    assert ResumePoint(path).cpu_precision is None and not ResumePoint(path).averages_weights


def test_a_path_that_is_no_checkpoint_file_is_named_without_reading(tmp_path):
    missing = ResumePoint(tmp_path / "nowhere.ckpt").path_problem()
    assert missing.startswith(f"ckpt_path={tmp_path}/nowhere.ckpt does not exist")
    assert ResumePoint(tmp_path).path_problem().startswith(f"ckpt_path={tmp_path} is a folder")
