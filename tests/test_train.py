"""End to end: `train(cfg)` in-process and `python train.py` as a user runs it."""

import os
import subprocess
import sys

import pytest
import torch

from helpers.hydra_compose import ROOT, compose_train
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.data.toy import ToyCorpus
from transformer_nmt.model import RNNAttention
from transformer_nmt.runtime.allocator import FAST_MALLOC
from transformer_nmt.train import train
from transformer_nmt.training.plan.precision import auto_precision
from transformer_nmt.training.run.run_lock import RunLock, RunLockedError
from transformer_nmt.training.run.sweeps import optimized_metric

TOY = ["experiment=toy", "logger=none"]
# Drawing attention maps would take most of a toy run's validation; the RNN test checks them.
NO_MAPS = "~callbacks.attention_maps"


def test_train_in_process_writes_checkpoints_that_carry_model_and_tokenizer(tmp_path):
    metrics = train(compose_train(tmp_path, [*TOY, NO_MAPS, "trainer.max_epochs=2"]))

    assert {"train/loss", "val/loss", "val/ppl", "val/bleu"} <= metrics.keys()
    checkpoints = tmp_path / "run" / "checkpoints"
    best = list(checkpoints.glob("step*-bleu*.ckpt"))
    assert len(best) == 1 and (checkpoints / "last.ckpt").exists()
    # Plain data only: loads without unpickling code, and rebuilds tokenizer and model.
    ckpt = torch.load(checkpoints / "last.ckpt", weights_only=True)
    assert ckpt["model_config"]["d_model"] == 64 and ckpt["model_config"]["N"] == 2
    assert ckpt["precision"] == {"device": "cpu", "precision": auto_precision("cpu")}
    tokenizer = BPETokenizer.from_str(ckpt["tokenizer"])
    sentence = "three one four"
    assert tokenizer.decode_batch(tokenizer.encode_batch([sentence])) == [sentence]


def test_bpe_dropout_draws_a_segmentation_for_every_epoch(tmp_path, caplog):
    overrides = [
        *TOY,
        "data.bpe_dropout=0.2",
        "data.corpus.num_train=300",
        "data.max_tokens=192",
        "trainer.max_epochs=3",
        "+trainer.limit_val_batches=0",
    ]
    with caplog.at_level("INFO", logger="transformer_nmt.data.bpe_dropout"):
        train(compose_train(tmp_path, overrides))
    drawn = [r for r in caplog.records if r.getMessage().startswith("BPE-dropout: a new")]
    assert len(drawn) == 3


@pytest.mark.slow
def test_overfits_a_tiny_task(tmp_path):
    # 256 toy pairs as local text files, validated on the training pairs themselves: without
    # label smoothing the loss must approach zero and greedy BLEU 100.
    pairs = ToyCorpus(num_train=256).read("train", "en", "de")
    for lang, side in (("en", 0), ("de", 1)):
        (tmp_path / f"train.{lang}").write_text("\n".join(p[side] for p in pairs) + "\n")
    metrics = train(
        compose_train(
            tmp_path,
            [
                *TOY,
                NO_MAPS,
                "data=multi30k",
                f"data.corpus.path={tmp_path}",
                "data.corpus.splits={train:train,val:train,test:train}",
                "data.src_lang=en",
                "data.tgt_lang=de",
                "data.vocab_size=512",
                "data.min_frequency=1",
                "data.max_tokens=1024",
                "module.label_smoothing=0",
                # The model's fit is asserted, not the CPU's: auto picks bf16 by a timed probe,
                # and bf16's loss floor differs, on some CPUs under some loads.
                "trainer.precision=32-true",
                "trainer.max_epochs=100",
                # One validation, at the end: the metrics asserted are the last epoch's.
                "trainer.check_val_every_n_epoch=100",
                "+trainer.num_sanity_val_steps=0",
            ],
        )
    )
    assert metrics["train/loss"] < 0.05
    assert metrics["val/bleu"] > 98


@pytest.mark.slow
def test_train_py_runs_as_a_user_runs_it_with_offline_wandb(tmp_path):
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    subprocess.run(
        [
            sys.executable,
            "train.py",
            "experiment=toy",
            "debug=fast",
            f"paths.log_dir={tmp_path}",
            f"paths.cache_dir={tmp_path}/cache",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=600,
    )
    (run,) = (tmp_path / "toy" / "runs").iterdir()
    assert (run / "checkpoints" / "last.ckpt").exists()
    (wandb_run,) = (run / "wandb").glob("offline-run-*")
    (history,) = wandb_run.glob("run-*.wandb")
    assert b"val/bleu" in history.read_bytes() and b"train/loss" in history.read_bytes()


@pytest.mark.slow
def test_a_run_that_ends_before_its_first_validation_succeeds_and_says_the_metric_is_missing(
    tmp_path, caplog
):
    cfg = compose_train(tmp_path, [*TOY, "trainer.max_steps=2", "+trainer.limit_val_batches=0"])
    with caplog.at_level("WARNING", logger="transformer_nmt.training.run.sweeps"):
        assert optimized_metric(cfg, train(cfg)) is None  # what `python train.py` returns
    assert "optimized_metric=val/bleu is missing" in caplog.text
    checkpoint = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(checkpoint, weights_only=True)["global_step"] == 2


def test_help_lists_the_config_groups():
    out = subprocess.run(
        [sys.executable, "train.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    for group in (
        "model: base, big, narrow, rnn_attention, small, student_3_1, student_3_1_d128,"
        " student_6_1, student_6_2, tiny",
        "data:",
        "trainer:",
        "logger:",
        "experiment:",
    ):
        assert group in out


@pytest.mark.slow
def test_train_py_composes_the_rnn():
    out = subprocess.run(
        [sys.executable, "train.py", "model=rnn_attention", "--cfg", "job"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "_target_: transformer_nmt.model.rnn.RNNAttention" in out


@pytest.mark.slow
def test_the_rnn_learns_the_toy_task_and_draws_its_alignments(tmp_path, one_thread):
    overrides = [
        *TOY,
        "model=rnn_attention",
        "model.embed_dim=32",
        "model.hidden_size=64",
        "model.dropout=0",
        "trainer.max_epochs=-1",
        "trainer.max_steps=120",  # 8 epochs of 15 batches
        "trainer.check_val_every_n_epoch=8",
        "+trainer.limit_val_batches=1",
        "+trainer.num_sanity_val_steps=0",
        "module.max_len_b=5",
    ]
    metrics = train(compose_train(tmp_path, overrides))
    assert metrics["val/bleu"] > 50
    # The attention maps callback draws alpha_ij alone: an RNN has no self-attention.
    drawn = sorted(p.name for p in (tmp_path / "run" / "attention").rglob("*.png"))
    assert drawn == ["sentence0_decoder_src_layer1.png", "sentence1_decoder_src_layer1.png"]
    model, _ = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert isinstance(model, RNNAttention) and model.config.hidden_size == 64


def _probe_glibc_tunables(env: dict) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "train.py",
            "--cfg",
            "job",
            "--resolve",
            "data=toy",
            "+probe=${oc.env:GLIBC_TUNABLES}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return next(line for line in out.splitlines() if line.startswith("probe:")).split()[1]


def test_train_py_runs_with_the_fast_allocator_unless_told_otherwise():
    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    assert _probe_glibc_tunables(plain) == FAST_MALLOC
    assert _probe_glibc_tunables({**plain, "GLIBC_TUNABLES": "glibc.malloc.check=0"}) == (
        "glibc.malloc.check=0"
    )


def test_a_second_run_in_the_same_folder_is_refused_naming_the_first(tmp_path):
    cfg = compose_train(tmp_path, TOY)
    with RunLock(cfg.paths.output_dir):  # the first run, still writing
        with pytest.raises(RunLockedError, match=f"process {os.getpid()} on"):
            train(cfg)
    assert not list((tmp_path / "run").glob("checkpoints/*"))  # refused before writing anything
