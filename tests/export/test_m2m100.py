"""`nmt-import hf` and `nmt-export hf` on M2M-100: a tiny M2M100ForConditionalGeneration with
random weights and a SentencePiece model trained here becomes a checkpoint whose logits and
greedy outputs are transformers' for two target languages, and exports back to a folder that
transformers loads and generates from as ours translates."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from transformer_nmt import Translator
from transformer_nmt.checkpoint import load_checkpoint, read_checkpoint
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.cli.import_model import main as import_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.framing import pad_batch, source_batch
from transformer_nmt.data.languages import LANGUAGES_KEY, Languages, tag_ids
from transformer_nmt.data.tokenizer import EOS_ID
from transformer_nmt.decoding import greedy_search

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
from helpers.m2m100_folder import generate, write_m2m100_folder  # noqa: E402

MAX_LEN_B = 3
pytestmark = pytest.mark.usefixtures("one_thread")
TEXTS = ["ein hund liest", "zwei kinder rennen über die wiese im park", "xyz", "eine frau"]
TARGETS = ["fr", "en"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("m2m") / "m2m100-tiny"
    write_m2m100_folder(folder)
    return folder


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imported") / "m2m100.ckpt"
    import_main(["hf", str(folder), str(out)])
    return out


def reference(folder: Path):
    model = transformers.M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    return model, transformers.M2M100Tokenizer.from_pretrained(folder, src_lang="de")


def test_the_checkpoint_records_every_direction_with_both_tags(folder, imported):
    checkpoint = read_checkpoint(imported)
    languages = Languages.from_dict(checkpoint[LANGUAGES_KEY])
    assert languages.tag_side == "both" and len(languages.languages) == 100
    assert ("de", "fr") in languages.directions
    model, tokenizer = load_checkpoint(imported)
    config = model.config
    assert (config.norm_first, config.positions, config.tie_embeddings) == (True, "fairseq", "all")
    assert tokenizer.tokens()[config.decoder_start] == "</s>"
    # Language tags are special tokens: decoding skips them, as transformers' pipelines do.
    words = tokenizer.encode_batch(["un chien"], side="target")[0]
    tag = tokenizer.tokens().index("<2fr>")
    assert tokenizer.decode_batch([[tag, *words, tag]]) == ["un chien"]


def test_tokens_and_logits_are_transformers(folder, imported):
    model, tokenizer = load_checkpoint(imported)
    theirs_model, theirs_tokenizer = reference(folder)
    languages = Languages.from_dict(read_checkpoint(imported)[LANGUAGES_KEY])
    to_ours = torch.tensor(tokenizer.folder_ids())
    frame = languages.frame("fr", tag_ids(tokenizer.tokens(), languages), "de")
    batch = theirs_tokenizer(TEXTS, return_tensors="pt", padding=True)
    src = source_batch(
        tokenizer.encode_batch(TEXTS), model.config.max_positions, frame.source_prefix
    )
    real = batch.attention_mask.bool()
    assert src.shape == batch.input_ids.shape
    assert torch.equal(src[real], to_ours[batch.input_ids][real])  # `__de__ tokens </s>`
    targets = tokenizer.encode_batch(["un chien court", "deux enfants jouent", "une"], "target")
    rows = torch.tensor(tokenizer.folder_rows())
    tag, pad = theirs_tokenizer.get_lang_id("fr"), theirs_model.config.pad_token_id
    start = theirs_model.config.decoder_start_token_id
    tgt_theirs = pad_batch([[start, tag, *rows[t].tolist()] for t in targets], pad_id=pad)
    tgt_ours = pad_batch([[frame.bos_id, *t] for t in targets])
    with torch.no_grad():
        ours = model(src[:3], tgt_ours)[..., to_ours]  # our columns in the folder's order
        theirs = theirs_model(
            input_ids=batch.input_ids[:3],
            attention_mask=batch.attention_mask[:3],
            decoder_input_ids=tgt_theirs,
        ).logits[:, 1:]  # the prediction after </s>, the tag, is forced: ours has none
    decoded = tgt_ours != 0
    torch.testing.assert_close(ours[decoded], theirs[decoded], atol=1e-5, rtol=0)


@pytest.mark.parametrize("lang", TARGETS)
def test_greedy_outputs_are_transformers_generate(folder, imported, lang):
    theirs_model, theirs_tokenizer = reference(folder)
    model, tokenizer = load_checkpoint(imported)
    languages = Languages.from_dict(read_checkpoint(imported)[LANGUAGES_KEY])
    frame = languages.frame(lang, tag_ids(tokenizer.tokens(), languages), "de")
    rows = tokenizer.folder_rows()
    translator = Translator.from_checkpoint(imported, device="cpu")
    texts = translator.translate(
        TEXTS, beam_size=1, max_len_b=MAX_LEN_B, tgt_lang=lang, src_lang="de"
    )
    outputs = []
    for text, translated in zip(TEXTS, texts, strict=True):
        tag = theirs_tokenizer.get_lang_id(lang)
        theirs = generate(theirs_model, theirs_tokenizer, text, tag, MAX_LEN_B)
        src = source_batch(tokenizer.encode_batch([text]), 64, frame.source_prefix)
        ours = greedy_search(model, src, frame.bos_id, EOS_ID, max_len_b=MAX_LEN_B)[0].tolist()
        start = theirs_model.config.decoder_start_token_id
        assert theirs == [start, tag, *(rows[i] for i in ours)]
        assert translated == tokenizer.decode_batch([ours])[0]
        outputs.append(tuple(ours))
    assert len(set(outputs)) > 1  # sources decoded, not one constant


def test_nmt_translate_takes_both_languages_and_needs_the_source_one(imported, tmp_path, capsys):
    source = tmp_path / "source.de"
    source.write_text("\n".join(TEXTS[:2]) + "\n")
    common = [str(imported), str(source), "--beam-size", "1", "--max-len-b", str(MAX_LEN_B)]
    translate_main([*common, "--src-lang", "de", "--tgt-lang", "fr"])
    expected = Translator.from_checkpoint(imported, device="cpu").translate(
        TEXTS[:2], beam_size=1, max_len_b=MAX_LEN_B, tgt_lang="fr", src_lang="de"
    )
    assert capsys.readouterr().out.splitlines() == expected
    with pytest.raises(SystemExit, match="name the source language with src_lang \\(--src-lang"):
        translate_main([*common, "--tgt-lang", "fr"])


def test_export_loads_in_transformers_and_generates_as_ours(imported, tmp_path):
    export_main(["hf", str(imported), str(tmp_path / "hf")])
    assert "forced_bos_token_id" in (tmp_path / "hf" / "README.md").read_text()
    exported, exported_tokenizer = reference(tmp_path / "hf")
    model, tokenizer = load_checkpoint(imported)
    languages = Languages.from_dict(read_checkpoint(imported)[LANGUAGES_KEY])
    rows = tokenizer.folder_rows()
    for lang in TARGETS:
        frame = languages.frame(lang, tag_ids(tokenizer.tokens(), languages), "de")
        for text in TEXTS:
            tag = exported_tokenizer.get_lang_id(lang)
            theirs = generate(exported, exported_tokenizer, text, tag, MAX_LEN_B)
            src = source_batch(tokenizer.encode_batch([text]), 64, frame.source_prefix)
            ours = greedy_search(model, src, frame.bos_id, EOS_ID, max_len_b=MAX_LEN_B)[0]
            assert theirs == [exported.config.decoder_start_token_id, tag, *(rows[i] for i in ours)]
    import_main(["hf", str(tmp_path / "hf"), str(tmp_path / "again.ckpt")])
    first, again = read_checkpoint(imported), read_checkpoint(tmp_path / "again.ckpt")
    for key in ("model_config", "tokenizer", LANGUAGES_KEY):
        assert again[key] == first[key], key
    for key, t in first["state_dict"].items():
        assert torch.equal(again["state_dict"][key], t), key


def test_ctranslate2_refuses_it_naming_the_switches(imported, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        export_main(["ct2", str(imported), str(tmp_path / "ct2")])
    message = str(exit_info.value)
    assert "model.positions=fairseq" in message and "model.decoder_start=" in message
    assert not (tmp_path / "ct2").exists()


REFUSED = {
    "activation_function": "tanh",
    "scale_embedding": False,
    "tie_word_embeddings": False,
    "decoder_attention_heads": 1,
    "d_model": 15,
}


@pytest.mark.parametrize("key, value", REFUSED.items(), ids=REFUSED.keys())
def test_another_architecture_is_refused_naming_the_key(folder, tmp_path, key, value):
    variant = tmp_path / "variant"
    shutil.copytree(folder, variant)
    config = json.loads((variant / "config.json").read_text())
    (variant / "config.json").write_text(json.dumps(config | {key: value}))
    with pytest.raises(SystemExit) as exit_info:
        import_main(["hf", str(variant), str(tmp_path / "out.ckpt")])
    assert f"{key}=" in str(exit_info.value) and "\n" not in str(exit_info.value)
    assert not (tmp_path / "out.ckpt").exists()


def test_a_folder_of_another_model_type_is_refused_naming_it(folder, tmp_path):
    variant = tmp_path / "bert-base"
    shutil.copytree(folder, variant)
    config = json.loads((variant / "config.json").read_text())
    (variant / "config.json").write_text(json.dumps(config | {"model_type": "bert"}))
    with pytest.raises(SystemExit) as exit_info:
        import_main(["hf", str(variant), str(tmp_path / "out.ckpt")])
    message = str(exit_info.value)
    assert message.startswith(f"error: {variant}: its config.json has model_type='bert'")
    assert "'marian'" in message and "'m2m_100'" in message and "\n" not in message
    assert not (tmp_path / "out.ckpt").exists()
