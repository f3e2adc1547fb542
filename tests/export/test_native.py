"""Our own safetensors folder: the same model back, tied matrices stored once, no pickle."""

import json

import pytest
import torch
from safetensors import safe_open

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt import Translator
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.export import ExportError
from transformer_nmt.export.native import load_safetensors, save_safetensors


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    return write_checkpoint(tmp_path_factory.mktemp("ckpt") / "last.ckpt", tokenizer, seed=3)


@pytest.mark.parametrize("source", ["checkpoint", "translator"])
def test_the_folder_gives_the_model_back_with_its_ties(checkpoint, tmp_path, source):
    model, tokenizer = load_checkpoint(checkpoint)
    if source == "translator":  # a CPU Translator's model: linear weights laid out transposed
        model = Translator(model, tokenizer, device="cpu").model
        assert not model.generator.weight.is_contiguous()
    save_safetensors(model, tokenizer, tmp_path)
    loaded, loaded_tokenizer = load_safetensors(tmp_path)
    assert loaded.state_dict().keys() == model.state_dict().keys()
    for key, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], t), key
    assert loaded.generator.weight is loaded.src_embed.weight  # tied again, not copied
    with safe_open(tmp_path / "model.safetensors", framework="pt") as f:
        embeddings = [k for k in f.keys() if f.get_slice(k).get_shape()[0] == tokenizer.vocab_size]
    assert len(embeddings) == 1  # one matrix serves source, target and output
    assert loaded_tokenizer.to_str() == tokenizer.to_str()


def test_nmt_export_safetensors_translates_as_the_checkpoint(checkpoint, tmp_path):
    export_main(["safetensors", str(checkpoint), str(tmp_path / "out")])
    files = {p.name for p in (tmp_path / "out").iterdir()}
    assert files == {"model.safetensors", "config.json", "tokenizer.json", "README.md"}
    options = dict(beam_size=2, max_len_b=3)
    folder = Translator.from_folder(tmp_path / "out", device="cpu")
    ckpt = Translator.from_checkpoint(checkpoint, device="cpu")
    assert folder.translate(SENTENCES[:4], **options) == ckpt.translate(SENTENCES[:4], **options)


def test_a_folder_of_another_format_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "marian"}))
    with pytest.raises(ExportError, match="is not a transformer-nmt config .format None.; a Hug"):
        load_safetensors(tmp_path)


def test_exporting_into_a_folder_holding_files_needs_force(checkpoint, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match=f"error: {tmp_path} is not empty: choose another"):
        export_main(["safetensors", str(checkpoint), str(tmp_path)])
    export_main(["safetensors", str(checkpoint), str(tmp_path), "--force"])
    assert (tmp_path / "notes.txt").read_text() == "mine" and (tmp_path / "config.json").is_file()
