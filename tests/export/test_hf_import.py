"""`nmt-import hf`: an OPUS-MT-shaped MarianMT folder, built here with random weights and a
SentencePiece model trained here, becomes a checkpoint whose logits, tokens and translations are
transformers'; exporting it back and importing again changes nothing; other architectures are
refused before anything is written."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from transformer_nmt import Translator
from transformer_nmt.checkpoint import load_checkpoint, read_checkpoint
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.cli.import_model import main as import_main
from transformer_nmt.data.framing import pad_batch, source_batch
from transformer_nmt.data.tokenizer import BOS_ID

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
from helpers.opus_folder import ENGLISH, write_opus_folder  # noqa: E402

MAX_LEN_B = 3
TEXTS = ["ein hund liest", "zwei kinder rennen über die wiese im park", "xyz"]


# OPUS-MT's symmetric shape, and a student's: a decoder of its own depth and width.
SHAPES = {"2-2": {}, "2-1": {"decoder_layers": 1, "decoder_ffn_dim": 8}}


@pytest.fixture(scope="module", params=SHAPES, ids=SHAPES)
def opus(request, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("opus") / "opus-mt-de-en"
    write_opus_folder(folder, **SHAPES[request.param])
    return folder


@pytest.fixture(scope="module")
def imported(opus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imported") / "opus.ckpt"
    import_main(["hf", str(opus), str(out)])
    return out


def reference(folder: Path):
    marian = transformers.MarianMTModel.from_pretrained(folder).eval()
    return marian, transformers.MarianTokenizer.from_pretrained(folder)


def test_tokens_and_logits_are_transformers(opus, imported):
    model, tokenizer = load_checkpoint(imported)
    marian, marian_tokenizer = reference(opus)
    c = marian.config
    assert (model.config.N_enc, model.config.N_dec) == (c.encoder_layers, c.decoder_layers)
    assert (model.config.d_ff, model.config.d_ff_dec) == (c.encoder_ffn_dim, c.decoder_ffn_dim)
    to_ours = torch.tensor(tokenizer.marian_ids())
    batch = marian_tokenizer(TEXTS, return_tensors="pt", padding=True)
    src = source_batch(tokenizer.encode_batch(TEXTS), model.config.max_positions)
    real = batch.attention_mask.bool()
    assert src.shape == batch.input_ids.shape and torch.equal(
        src[real], to_ours[batch.input_ids][real]
    )
    targets = marian_tokenizer(text_target=ENGLISH[:3], add_special_tokens=False).input_ids
    assert [
        [tokenizer.marian_rows()[i] for i in row]
        for row in tokenizer.encode_batch(ENGLISH[:3], side="target")
    ] == targets
    pad = marian.config.pad_token_id
    tgt_theirs = pad_batch([[pad, *row] for row in targets], pad_id=pad)
    tgt_ours = pad_batch([[BOS_ID, *to_ours[row].tolist()] for row in targets])
    with torch.no_grad():
        ours = model(src, tgt_ours)[..., to_ours]  # our columns in Marian's order
        theirs = marian(**batch, decoder_input_ids=tgt_theirs).logits
    decoded = tgt_ours != 0  # what a padded decoder position predicts is never used
    torch.testing.assert_close(ours[decoded], theirs[decoded], atol=1e-4, rtol=0)


def test_translates_as_transformers_generates(opus, imported):
    marian, marian_tokenizer = reference(opus)
    theirs = []
    for text in TEXTS:  # random weights never end: both stop at source length + MAX_LEN_B
        batch = marian_tokenizer([text], return_tensors="pt")
        limit = batch.input_ids.size(1) + MAX_LEN_B
        output = marian.generate(
            **batch, num_beams=1, max_new_tokens=limit, forced_eos_token_id=None
        )
        theirs += marian_tokenizer.batch_decode(output, skip_special_tokens=True)
    translator = Translator.from_checkpoint(imported, device="cpu")
    ours = translator.translate(TEXTS, beam_size=1, max_len_b=MAX_LEN_B)
    assert ours == theirs and len(set(ours)) > 1  # sources decoded, not one constant


def test_export_then_import_changes_nothing(imported, tmp_path):
    export_main(["hf", str(imported), str(tmp_path / "hf")])
    import_main(["hf", str(tmp_path / "hf"), str(tmp_path / "again.ckpt")])
    first, again = read_checkpoint(imported), read_checkpoint(tmp_path / "again.ckpt")
    assert again["model_config"] == first["model_config"]
    assert again["tokenizer"] == first["tokenizer"]
    assert first["state_dict"].keys() == again["state_dict"].keys()
    for key, t in first["state_dict"].items():
        assert torch.equal(again["state_dict"][key], t), key
    # Our own folder and CTranslate2 take the SentencePiece tokenizer too.
    export_main(["safetensors", str(imported), str(tmp_path / "native")])
    original = Translator.from_checkpoint(imported, device="cpu")
    native = Translator.from_folder(tmp_path / "native", device="cpu")
    ct2 = Translator.from_checkpoint(imported, device="cpu", engine="ct2")
    # One sentence a batch: CTranslate2's length limit is its batch's, and random weights may
    # never end a sentence before it. CTranslate2 greedily: ours counts PAD and BOS in the
    # softmax that scores a beam (one score everywhere), which random weights give real mass,
    # so beams may rank apart where greedy choices cannot.
    for text in TEXTS:
        for other, beam in ((native, 2), (ct2, 1)):
            expected = original.translate([text], beam_size=beam, max_len_b=MAX_LEN_B)
            assert other.translate([text], beam_size=beam, max_len_b=MAX_LEN_B) == expected


REFUSED = {
    "normalize_before": True,
    "normalize_embedding": True,
    "scale_embedding": False,
    "static_position_embeddings": False,
    "activation_function": "tanh",
    "decoder_vocab_size": 1000,
    "decoder_attention_heads": 1,
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize("key, value", REFUSED.items(), ids=REFUSED.keys())
def test_another_architecture_is_refused_naming_the_key(opus, tmp_path, capsys, key, value):
    folder = tmp_path / "variant"
    shutil.copytree(opus, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {key: value}))
    with pytest.raises(SystemExit) as exit_info:
        import_main(["hf", str(folder), str(tmp_path / "out.ckpt")])
    assert f"{key}=" in str(exit_info.value)
    assert not (tmp_path / "out.ckpt").exists()


def test_a_folder_without_its_tokenizer_is_refused(opus, tmp_path):
    folder = tmp_path / "variant"
    shutil.copytree(opus, folder)
    (folder / "source.spm").unlink()
    with pytest.raises(SystemExit, match="lacks source.spm"):
        import_main(["hf", str(folder), str(tmp_path / "out.ckpt")])
    assert not (tmp_path / "out.ckpt").exists()
