"""Checkpoint files read without the trainer: the model and tokenizer, refusals, averaging."""

from pathlib import Path

import pytest
import torch

from helpers.checkpoint_files import SENTENCES, TINY, write_checkpoint
from transformer_nmt.checkpoint import (
    CheckpointError,
    average_checkpoints,
    last_checkpoints,
    load_checkpoint,
)
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.model import RNNAttention, Transformer


@pytest.fixture(scope="module")
def tokenizer() -> BPETokenizer:
    return BPETokenizer.train(SENTENCES, vocab_size=300, min_frequency=1)


def test_loads_model_and_tokenizer(tmp_path, tokenizer):
    model, loaded = load_checkpoint(write_checkpoint(tmp_path / "a.ckpt", tokenizer))
    assert not model.training and loaded.to_str() == tokenizer.to_str()
    torch.manual_seed(0)
    expected = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2)
    for key, t in expected.state_dict().items():
        assert torch.equal(model.state_dict()[key], t), key


def test_loads_an_rnn_as_an_rnn(tmp_path, tokenizer):
    path = write_checkpoint(tmp_path / "a.ckpt", tokenizer, family="rnn_attention")
    assert torch.load(path, weights_only=True)["model_config"]["family"] == "rnn_attention"
    model, _ = load_checkpoint(path)
    assert isinstance(model, RNNAttention) and not model.training
    torch.manual_seed(0)
    expected = RNNAttention(tokenizer.vocab_size, PAD_ID, **TINY["rnn_attention"]).eval()
    for key, t in expected.state_dict().items():
        assert torch.equal(model.state_dict()[key], t), key
    src, tgt_in = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    torch.testing.assert_close(model(src, tgt_in), expected(src, tgt_in))


def test_a_model_config_without_family_is_a_transformers(tmp_path, tokenizer):
    path = write_checkpoint(tmp_path / "a.ckpt", tokenizer)
    checkpoint = torch.load(path, weights_only=True)
    del checkpoint["model_config"]["family"]  # as written before there were families
    torch.save(checkpoint, path)
    model, _ = load_checkpoint(path)
    assert isinstance(model, Transformer)


def test_refuses_an_unknown_family_or_weights_of_another(tmp_path, tokenizer):
    path = write_checkpoint(tmp_path / "a.ckpt", tokenizer)
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["model_config"]["family"] = "lstm_lm"
    torch.save(checkpoint, path)
    with pytest.raises(CheckpointError, match="unknown model family 'lstm_lm'"):
        load_checkpoint(path)
    rnn = write_checkpoint(tmp_path / "b.ckpt", tokenizer, family="rnn_attention")
    rnn = torch.load(rnn, weights_only=True)
    torch.save(
        {**rnn, "model_config": checkpoint["model_config"] | {"family": "transformer"}}, path
    )
    with pytest.raises(CheckpointError, match="do not fit its model config"):
        load_checkpoint(path)


class Payload:
    """Unpickling this would create a file: proof that code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_refuses_to_run_code_from_a_checkpoint(tmp_path, tokenizer):
    path = write_checkpoint(tmp_path / "a.ckpt", tokenizer)
    checkpoint = torch.load(path, weights_only=True)
    torch.save({**checkpoint, "extra": Payload(tmp_path / "ran")}, path)
    with pytest.raises(CheckpointError, match="could run code"):
        load_checkpoint(path)
    assert not (tmp_path / "ran").exists()


def test_refuses_a_tokenizer_of_another_vocabulary(tmp_path, tokenizer):
    path = write_checkpoint(tmp_path / "a.ckpt", tokenizer)
    other = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    checkpoint = torch.load(path, weights_only=True)
    torch.save({**checkpoint, "tokenizer": other.to_str()}, path)
    with pytest.raises(CheckpointError, match="tokenizer does not belong"):
        load_checkpoint(path)


def test_refuses_weights_of_another_vocabulary(tmp_path, tokenizer):
    path = write_checkpoint(tmp_path / "a.ckpt", tokenizer)
    checkpoint = torch.load(path, weights_only=True)
    state = {
        k: v[:-1] if "lut" in k or "generator" in k else v
        for k, v in checkpoint["state_dict"].items()
    }
    torch.save({**checkpoint, "state_dict": state}, path)
    with pytest.raises(CheckpointError, match="vocabulary does not match"):
        load_checkpoint(path)


def test_refuses_a_file_without_tokenizer(tmp_path, tokenizer):
    path = write_checkpoint(tmp_path / "a.ckpt", tokenizer)
    checkpoint = torch.load(path, weights_only=True)
    del checkpoint["tokenizer"]
    torch.save(checkpoint, path)
    with pytest.raises(CheckpointError, match="lacks \\['tokenizer'\\]"):
        load_checkpoint(path)


def test_averaging_identical_checkpoints_returns_the_same_weights(tmp_path, tokenizer):
    paths = [write_checkpoint(tmp_path / f"{i}.ckpt", tokenizer, seed=0) for i in range(3)]
    torch.save(average_checkpoints(paths), tmp_path / "avg.ckpt")
    averaged, _ = load_checkpoint(tmp_path / "avg.ckpt")
    original, _ = load_checkpoint(paths[0])
    for key, t in original.state_dict().items():
        assert torch.equal(averaged.state_dict()[key], t), key


def test_averaging_different_checkpoints_takes_the_mean(tmp_path, tokenizer):
    paths = [write_checkpoint(tmp_path / f"{i}.ckpt", tokenizer, seed=i) for i in range(2)]
    torch.save(average_checkpoints(paths), tmp_path / "avg.ckpt")
    averaged, _ = load_checkpoint(tmp_path / "avg.ckpt")
    a, b = (load_checkpoint(p)[0].state_dict() for p in paths)
    key = "encoder.layers.0.self_attn.w_qkv.weight"
    assert not torch.equal(averaged.state_dict()[key], a[key])
    assert torch.allclose(averaged.state_dict()[key], (a[key] + b[key]) / 2)
    # Tied embeddings stay tied.
    assert averaged.generator.weight is averaged.src_embed.weight


def test_averaging_rnn_checkpoints_takes_the_mean_and_keeps_the_family(tmp_path, tokenizer):
    paths = [
        write_checkpoint(tmp_path / f"{i}.ckpt", tokenizer, seed=i, family="rnn_attention")
        for i in range(2)
    ]
    averaged = average_checkpoints(paths)
    assert averaged["model_config"]["family"] == "rnn_attention"
    torch.save(averaged, tmp_path / "avg.ckpt")
    model, _ = load_checkpoint(tmp_path / "avg.ckpt")
    a, b = (load_checkpoint(p)[0].state_dict() for p in paths)
    key = "cells.0.weight_hh"
    assert isinstance(model, RNNAttention)
    assert torch.allclose(model.state_dict()[key], (a[key] + b[key]) / 2)


def test_averaging_students_keeps_each_stacks_depth_and_refuses_another_shape(tmp_path, tokenizer):
    student = dict(N_enc=2, N_dec=1, d_ff_dec=8)
    paths = [
        write_checkpoint(tmp_path / f"{i}.ckpt", tokenizer, seed=i, **student) for i in range(2)
    ]
    torch.save(average_checkpoints(paths), tmp_path / "avg.ckpt")
    averaged, _ = load_checkpoint(tmp_path / "avg.ckpt")
    assert (len(averaged.encoder.layers), len(averaged.decoder.layers)) == (2, 1)
    a, b = (load_checkpoint(p)[0].state_dict() for p in paths)
    key = "decoder.layers.0.feed_forward.w_1.weight"  # (d_ff_dec, d_model)
    assert averaged.state_dict()[key].shape == (8, 16)
    assert torch.allclose(averaged.state_dict()[key], (a[key] + b[key]) / 2)
    symmetric = write_checkpoint(tmp_path / "2-2.ckpt", tokenizer, N=2)
    with pytest.raises(CheckpointError, match="differs"):
        average_checkpoints([paths[0], symmetric])


def test_averaging_refuses_checkpoints_of_different_models(tmp_path, tokenizer):
    a = write_checkpoint(tmp_path / "a.ckpt", tokenizer)
    other = BPETokenizer.train(SENTENCES[:4], vocab_size=290, min_frequency=1)
    b = write_checkpoint(tmp_path / "b.ckpt", other)
    with pytest.raises(CheckpointError, match="differs"):
        average_checkpoints([a, b])


def test_last_checkpoints_are_the_periodic_ones_by_step_never_last_or_best(tmp_path, tokenizer):
    for step in (30, 10, 20):
        write_checkpoint(tmp_path / f"step{step}.ckpt", tokenizer, step=step)
    write_checkpoint(tmp_path / "step30-bleu9.00.ckpt", tokenizer, step=30, kind="best")
    write_checkpoint(tmp_path / "last.ckpt", tokenizer, step=35, kind="last")
    assert [p.name for p in last_checkpoints(tmp_path, 2)] == ["step20.ckpt", "step30.ckpt"]
    # Written before checkpoints were marked: periodic ones by their name, never last.ckpt.
    write_checkpoint(tmp_path / "step40.ckpt", tokenizer, step=40, kind=None)
    write_checkpoint(tmp_path / "last.ckpt", tokenizer, step=45, kind=None)
    assert [p.name for p in last_checkpoints(tmp_path, 2)] == ["step30.ckpt", "step40.ckpt"]
    with pytest.raises(CheckpointError) as info:
        last_checkpoints(tmp_path, 5)
    assert str(info.value) == (
        f"{tmp_path} holds 4 periodic checkpoints, fewer than the 5 to average (last.ckpt, "
        "step30-bleu9.00.ckpt: not periodic, never averaged): average fewer (--average-last 4), "
        "or name checkpoint files instead"
    )
