"""`nmt-import hf` and `nmt-export hf` on NLLB: a tiny M2M100ForConditionalGeneration with random
weights and the NllbTokenizer transformers saves from a SentencePiece model trained here becomes
a checkpoint whose source ids, logits and greedy outputs are transformers' for two target
languages named by NLLB's codes, and exports back to an NLLB folder that imports identically."""

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
from helpers.m2m100_folder import (  # noqa: E402
    LINES,
    NLLB_CODES,
    NLLB_SPARE_ROWS,
    generate,
    write_nllb_folder,
)

MAX_LEN_B = 3
pytestmark = pytest.mark.usefixtures("one_thread")
# Unknown pieces, doubled spaces and an uppercase letter: what the backend's normalizer changes.
TEXTS = [*LINES["de"][:2], "xyz  Über", "eine frau"]
SOURCE = NLLB_CODES["de"]
TARGETS = [NLLB_CODES["fr"], NLLB_CODES["en"]]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path]:
    """The NLLB folder, and the SentencePiece model its tokenizer was converted from."""
    folder = tmp_path_factory.mktemp("nllb") / "nllb-tiny"
    return folder, write_nllb_folder(folder)


@pytest.fixture(scope="module")
def folder(made) -> Path:
    return made[0]


@pytest.fixture(scope="module")
def imported(folder, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("imported") / "nllb.ckpt"
    import_main(["hf", str(folder), str(out)])
    return out


def reference(folder: Path):
    model = transformers.M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, src_lang=SOURCE)
    assert type(tokenizer).__name__ == "NllbTokenizer" and not tokenizer.legacy_behaviour
    return model, tokenizer


def frame_into(imported: Path, lang: str):
    _, tokenizer = load_checkpoint(imported)
    languages = Languages.from_dict(read_checkpoint(imported)[LANGUAGES_KEY])
    return languages.frame(lang, tag_ids(tokenizer.tokens(), languages), SOURCE)


def test_the_checkpoint_names_languages_by_nllb_codes(folder, imported):
    languages = Languages.from_dict(read_checkpoint(imported)[LANGUAGES_KEY])
    assert languages.languages == tuple(NLLB_CODES.values()) and languages.tag_side == "both"
    assert ("deu_Latn", "fra_Latn") in languages.directions
    model, tokenizer = load_checkpoint(imported)
    _, theirs = reference(folder)
    assert model.config.vocab_size == len(theirs) + NLLB_SPARE_ROWS
    assert tokenizer.tokens()[model.config.decoder_start] == "</s>"
    words = tokenizer.encode_batch(["un chien"], side="target")[0]
    tag = tokenizer.tokens().index("<2fra_Latn>")
    assert tokenizer.decode_batch([[tag, *words, tag]]) == ["un chien"]


def test_source_ids_and_logits_are_transformers(folder, imported):
    model, tokenizer = load_checkpoint(imported)
    theirs_model, theirs_tokenizer = reference(folder)
    to_ours = torch.tensor(tokenizer.folder_ids())
    frame = frame_into(imported, "fra_Latn")
    batch = theirs_tokenizer(TEXTS, return_tensors="pt", padding=True)
    src = source_batch(
        tokenizer.encode_batch(TEXTS), model.config.max_positions, frame.source_prefix
    )
    real = batch.attention_mask.bool()
    assert src.shape == batch.input_ids.shape
    assert torch.equal(src[real], to_ours[batch.input_ids][real])  # `deu_Latn tokens </s>`
    targets = tokenizer.encode_batch(["un chien court", "deux enfants jouent", "une"], "target")
    rows = torch.tensor(tokenizer.folder_rows())
    tag = theirs_tokenizer.convert_tokens_to_ids("fra_Latn")
    pad, start = theirs_model.config.pad_token_id, theirs_model.config.decoder_start_token_id
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
    frame = frame_into(imported, lang)
    rows = tokenizer.folder_rows()
    translator = Translator.from_checkpoint(imported, device="cpu")
    texts = translator.translate(
        TEXTS, beam_size=1, max_len_b=MAX_LEN_B, tgt_lang=lang, src_lang=SOURCE
    )
    tag = theirs_tokenizer.convert_tokens_to_ids(lang)
    start = theirs_model.config.decoder_start_token_id
    outputs = []
    for text, translated in zip(TEXTS, texts, strict=True):
        theirs = generate(theirs_model, theirs_tokenizer, text, tag, MAX_LEN_B)
        src = source_batch(tokenizer.encode_batch([text]), 64, frame.source_prefix)
        ours = greedy_search(model, src, frame.bos_id, EOS_ID, max_len_b=MAX_LEN_B)[0].tolist()
        assert theirs == [start, tag, *(rows[i] for i in ours)]
        assert translated == theirs_tokenizer.decode(theirs, skip_special_tokens=True)
        outputs.append(tuple(ours))
    assert len(set(outputs)) > 1  # sources decoded, not one constant


def test_nmt_translate_takes_the_codes_and_refuses_another_name(imported, tmp_path, capsys):
    source = tmp_path / "source.de"
    source.write_text("\n".join(TEXTS[:2]) + "\n")
    common = [str(imported), str(source), "--beam-size", "1", "--max-len-b", str(MAX_LEN_B)]
    translate_main([*common, "--src-lang", SOURCE, "--tgt-lang", "fra_Latn"])
    expected = Translator.from_checkpoint(imported, device="cpu").translate(
        TEXTS[:2], beam_size=1, max_len_b=MAX_LEN_B, tgt_lang="fra_Latn", src_lang=SOURCE
    )
    assert capsys.readouterr().out.splitlines() == expected
    with pytest.raises(SystemExit, match="no language 'fr'; it knows deu_Latn, fra_Latn, eng"):
        translate_main([*common, "--src-lang", SOURCE, "--tgt-lang", "fr"])


def test_export_writes_an_nllb_folder_that_imports_identically(imported, tmp_path):
    export_main(["hf", str(imported), str(tmp_path / "hf")])
    assert 'convert_tokens_to_ids("fra_Latn")' in (tmp_path / "hf" / "README.md").read_text()
    assert not (tmp_path / "hf" / "vocab.json").exists()
    exported, exported_tokenizer = reference(tmp_path / "hf")
    model, tokenizer = load_checkpoint(imported)
    rows = tokenizer.folder_rows()
    for lang in TARGETS:
        frame = frame_into(imported, lang)
        tag = exported_tokenizer.convert_tokens_to_ids(lang)
        for text in TEXTS:
            theirs = generate(exported, exported_tokenizer, text, tag, MAX_LEN_B)
            src = source_batch(tokenizer.encode_batch([text]), 64, frame.source_prefix)
            ours = greedy_search(model, src, frame.bos_id, EOS_ID, max_len_b=MAX_LEN_B)[0]
            assert theirs == [exported.config.decoder_start_token_id, tag, *(rows[i] for i in ours)]
    import_main(["hf", str(tmp_path / "hf"), str(tmp_path / "again.ckpt")])
    assert_same_checkpoint(read_checkpoint(imported), read_checkpoint(tmp_path / "again.ckpt"))


def test_a_folder_with_only_the_sentencepiece_model_imports_the_same(made, imported, tmp_path):
    folder, sentencepiece_model = made
    variant = tmp_path / "nllb-spm"
    shutil.copytree(folder, variant)
    (variant / "tokenizer.json").unlink()
    shutil.copy(sentencepiece_model, variant / "sentencepiece.bpe.model")
    import_main(["hf", str(variant), str(tmp_path / "spm.ckpt")])
    assert_same_checkpoint(read_checkpoint(imported), read_checkpoint(tmp_path / "spm.ckpt"))


def test_an_nllb_folder_without_its_tokenizer_is_refused_naming_both_files(folder, tmp_path):
    variant = tmp_path / "nllb"
    shutil.copytree(folder, variant)
    (variant / "tokenizer.json").unlink()
    assert json.loads((variant / "tokenizer_config.json").read_text())["tokenizer_class"]
    with pytest.raises(SystemExit) as exit_info:
        import_main(["hf", str(variant), str(tmp_path / "out.ckpt")])
    message = str(exit_info.value)
    assert "lacks tokenizer.json or sentencepiece.bpe.model (NLLB's tokenizer)" in message
    assert "hf download facebook/m2m100_418M" in message  # not an OPUS-MT example
    assert "\n" not in message and not (tmp_path / "out.ckpt").exists()


def assert_same_checkpoint(first: dict, again: dict) -> None:
    for key in ("model_config", "tokenizer", LANGUAGES_KEY):
        assert again[key] == first[key], key
    for key, t in first["state_dict"].items():
        assert torch.equal(again["state_dict"][key], t), key
