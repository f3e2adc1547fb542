"""A multilingual checkpoint translates into the language asked for, from the API and the CLI."""

import logging
from pathlib import Path

import pytest
import torch

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from helpers.multilingual_model import train_multilingual
from transformer_nmt.checkpoint import average_checkpoints, load_checkpoint
from transformer_nmt.cli.score import main as score_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.framing import TARGET_FRAME, cut_at_eos, decoder_input, source_batch
from transformer_nmt.data.languages import LANGUAGES_KEY, TAG_SIDES, Languages, tag_ids
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.decoding import greedy_search
from transformer_nmt.decoding.forced import cross_attention
from transformer_nmt.inference.alignment import Alignment, pharaoh
from transformer_nmt.inference.translator import Translator

LANGUAGES = ["en", "de", "fr"]


def multilingual_checkpoint(tmp_path, tag_side="target", exclude=("fr-de",)):
    """A tiny random model over a BPE with a tag a language, trained (so its checkpoint says)
    on every direction but those of `exclude`."""
    languages = Languages.from_config(LANGUAGES, exclude=exclude, tag_side=tag_side)
    tokenizer = BPETokenizer.train(SENTENCES, 300, 1, language_tokens=languages.tags)
    path = write_checkpoint(tmp_path / f"{tag_side}.ckpt", tokenizer)
    checkpoint = torch.load(path, weights_only=True)
    torch.save(checkpoint | {LANGUAGES_KEY: languages.to_dict()}, path)
    return path


@pytest.mark.parametrize("tag_side", ["target", "source", "both"])
def test_the_tag_of_the_language_asked_for_frames_the_search(tmp_path, tag_side):
    path = multilingual_checkpoint(tmp_path, tag_side)
    translator = Translator.from_checkpoint(path, device="cpu")
    model, tokenizer = load_checkpoint(path)
    tags = tag_ids(tokenizer.tokens(), translator.languages)
    tokens = tokenizer.encode_batch(["one two three", "four five"])
    outputs = {}
    for lang in ("de", "fr"):
        # "both": the source's own language (en) before it, the target's starting the decoder.
        prefix = {"source": (tags[lang],), "both": (tags["en"],)}.get(tag_side, ())
        bos = TARGET_FRAME["bos_id"] if tag_side == "source" else tags[lang]
        src = source_batch(tokens, model.config.max_positions, prefix)
        out = greedy_search(model, src, bos, TARGET_FRAME["eos_id"], max_len_b=5)
        expected = tokenizer.decode_batch([cut_at_eos(row) for row in out.tolist()])
        src_lang = "en" if tag_side == "both" else None
        found = translator.translate(
            ["one two three", "four five"], beam_size=1, max_len_b=5, tgt_lang=lang,
            src_lang=src_lang,
        )  # fmt: skip
        assert found == expected
        outputs[lang] = out.tolist()
    assert outputs["de"] != outputs["fr"]  # the tag changes what a random model writes


def test_languages_a_model_does_not_know_or_lacks_are_refused_with_the_list(tmp_path):
    translator = Translator.from_checkpoint(multilingual_checkpoint(tmp_path), device="cpu")
    with pytest.raises(ValueError, match="knows no language 'cs'; it knows en, de, fr"):
        translator.translate(["one"], tgt_lang="cs")
    with pytest.raises(ValueError, match="knows no language 'cs'"):
        translator.translate(["one"], tgt_lang="de", src_lang="cs")
    with pytest.raises(ValueError, match="several languages: name one .*--tgt-lang\\): en, de, fr"):
        translator.translate(["one"])


LOGGER = "transformer_nmt.inference.translator"


def test_a_direction_never_trained_is_translated_with_a_zero_shot_warning(tmp_path, caplog):
    translator = Translator.from_checkpoint(multilingual_checkpoint(tmp_path), device="cpu")

    def warnings() -> list[logging.LogRecord]:
        # Only the translator's: an earlier test in this process may have let INFO records through.
        return [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert len(translator.translate(["one"], beam_size=1, tgt_lang="de", src_lang="en")) == 1
        assert not warnings()
        assert len(translator.translate(["one"], beam_size=1, tgt_lang="de", src_lang="fr")) == 1
    (warning,) = warnings()
    assert "fr-de was never trained" in warning.getMessage()
    assert "zero-shot" in warning.getMessage()


def test_a_model_without_languages_refuses_a_target_language(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, 300, 1)
    translator = Translator.from_checkpoint(write_checkpoint(tmp_path / "m.ckpt", tokenizer))
    assert translator.languages is None
    with pytest.raises(ValueError, match="records no languages"):
        translator.translate(["one"], tgt_lang="de")


def test_averaged_checkpoints_keep_the_languages(tmp_path):
    path = multilingual_checkpoint(tmp_path)
    averaged = average_checkpoints([path, path])
    assert averaged[LANGUAGES_KEY] == torch.load(path, weights_only=True)[LANGUAGES_KEY]


def test_nmt_translate_takes_the_target_language_and_names_the_known_ones(tmp_path, capsys):
    path = multilingual_checkpoint(tmp_path)
    source = tmp_path / "in.txt"
    source.write_text("one two\nthree\n")
    translate_main([str(path), str(source), "--tgt-lang", "fr", "--beam-size", "1"])
    assert len(capsys.readouterr().out.splitlines()) == 2
    with pytest.raises(SystemExit, match="error: the model knows no language 'xx'; it knows en"):
        translate_main([str(path), str(source), "--tgt-lang", "xx"])
    plain = write_checkpoint(tmp_path / "plain.ckpt", BPETokenizer.train(SENTENCES, 300, 1))
    with pytest.raises(SystemExit, match="error: this model records no languages"):
        translate_main([str(plain), str(source), "--tgt-lang", "fr"])


def test_an_ensemble_of_multilingual_members_takes_the_target_language(tmp_path):
    path = multilingual_checkpoint(tmp_path)
    single = Translator.from_checkpoint(path, device="cpu")
    ensemble = Translator.from_ensemble([path, path], device="cpu")
    options = dict(beam_size=1, max_len_b=5, tgt_lang="fr")
    assert ensemble.translate(["one two"], **options) == single.translate(["one two"], **options)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A tiny model trained on the number words, per tag side: its translations end with EOS."""
    folder = tmp_path_factory.mktemp("trained")
    return {side: train_multilingual(folder / f"{side}.ckpt", side) for side in TAG_SIDES}


@pytest.mark.parametrize("tag_side", ["target", "source"])
def test_a_translation_scores_as_its_search_scored_it(trained, tag_side):
    translator = Translator.from_checkpoint(trained[tag_side], "cpu")
    sources = ["one two three", "four five", "zwei drei"]
    # A hypothesis's score is its log-probability, EOS included, whatever the length penalty.
    found = translator.translate(sources, beam_size=3, n_best=3, alpha=0, tgt_lang="fr")
    pairs = [(s, t, score) for s, hyps in zip(sources, found, strict=True) for t, score in hyps]
    scored = translator.score([s for s, _, _ in pairs], [t for _, t, _ in pairs], tgt_lang="fr")
    assert [s.score for s in scored] == pytest.approx([score for *_, score in pairs], abs=1e-5)
    other = translator.score([s for s, _, _ in pairs], [t for _, t, _ in pairs], tgt_lang="de")
    assert [s.score for s in other] != pytest.approx([s.score for s in scored], abs=1e-3)


def test_nmt_score_of_nmt_translate_n_best_is_its_search_score(trained, tmp_path, capsys):
    path = trained["target"]
    source = tmp_path / "in.txt"
    source.write_text("one two three\nfour five\n")
    options = ["--beam-size", "2", "--n-best", "2", "--alpha", "0", "--tgt-lang", "fr"]
    translate_main([str(path), str(source), *options])
    n_best = tmp_path / "nbest.txt"
    n_best.write_text(capsys.readouterr().out)
    score_main([str(path), "--src", str(source), "--n-best", str(n_best), "--tgt-lang", "fr"])
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 4
    for _, search_score, _, log_prob, _ in rows:
        assert float(log_prob) == pytest.approx(float(search_score), abs=1e-4)  # as printed
    with pytest.raises(SystemExit, match="error: the model knows no language 'xx'; it knows en"):
        score_main([str(path), "--src", str(source), "--n-best", str(n_best), "--tgt-lang", "xx"])


@pytest.mark.parametrize("tag_side", ["target", "source"])
def test_alignments_read_the_pair_as_the_tag_frames_it(trained, tag_side):
    path = trained[tag_side]
    translator = Translator.from_checkpoint(path, device="cpu")
    model, tokenizer = load_checkpoint(path)
    tags = tag_ids(tokenizer.tokens(), translator.languages)
    sources, targets = ["one two three four", "five six"], ["un deux trois", "quatre cinq six"]
    (src,), (tgt,) = tokenizer.encode_batch(sources[:1]), tokenizer.encode_batch(targets[:1])
    frame = translator.languages.frame("fr", tags)
    src_in = source_batch([src], model.config.max_positions, frame.source_prefix)
    tgt_in = torch.tensor([decoder_input(tgt, frame.bos_id)])
    weights = cross_attention(model.eval(), src_in, tgt_in, -1)[0, ..., len(frame.source_prefix) :]
    expected = pharaoh(weights, src, tgt, tokenizer.tokens(), "best")
    aligned = translator.score(sources, targets, alignment=Alignment(heads="best"), tgt_lang="fr")
    assert aligned[0].alignment == expected


def test_nmt_translate_align_reads_its_translations_after_the_tag(trained, tmp_path, capsys):
    path = trained["source"]
    source = tmp_path / "in.txt"
    source.write_text("one two three\nfour five six\n")
    translate_main([str(path), str(source), "--tgt-lang", "de", "--beam-size", "1", "--align"])
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    translator = Translator.from_checkpoint(path, device="cpu")
    sources = source.read_text().splitlines()
    scored = translator.score(
        sources, [text for text, _ in rows], alignment=Alignment(), tgt_lang="de"
    )
    assert [aligned for _, aligned in rows] == [s.alignment for s in scored]
    plain = translator.score(
        sources, [text for text, _ in rows], alignment=Alignment(), tgt_lang="fr"
    )
    assert [s.alignment for s in plain] != [s.alignment for s in scored]
