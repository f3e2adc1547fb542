"""CTranslate2's vocabulary map: it holds the target text's tokens, and the search keeps to them."""

import gzip

import pytest

from transformer_nmt import Translator
from transformer_nmt.cli.export import main as export_main
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.corpus import DataFormatError
from transformer_nmt.data.toy import ToyCorpus

pytest.importorskip("ctranslate2")
from transformer_nmt.export import vmap  # noqa: E402
from transformer_nmt.export.ct2 import vocabulary  # noqa: E402


def write_gz(path, lines):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{line}\n" for line in lines)
    return path


def candidates(text: str) -> set[str]:
    (line,) = text.splitlines()
    key, targets = line.split("\t")
    assert key == ""  # CTranslate2's rule for candidates of every batch
    return set(targets.split(" "))


@pytest.fixture(scope="module")
def toy_targets(tmp_path_factory):
    """The target side of the toy model's training data (conftest.train_toy's corpus)."""
    train = ToyCorpus(num_train=2000, num_val=0, num_test=40, max_len=6).read("train", "en", "de")
    folder = tmp_path_factory.mktemp("vmap")
    return write_gz(folder / "train.de.gz", [tgt for _, tgt in train])


def test_the_map_holds_exactly_the_tokens_of_the_text_read_in_chunks(toy, tmp_path, monkeypatch):
    _, tokenizer, test, _ = toy
    references = [tgt for _, tgt in test]
    monkeypatch.setattr(vmap, "CHUNK", 3)  # several chunks, the last one short
    text = vmap.target_vocabulary_map(tokenizer, write_gz(tmp_path / "ref.gz", references))
    tokens = vocabulary(tokenizer)
    expected = {tokens[i] for ids in tokenizer.encode_batch(references) for i in ids}
    assert candidates(text) == expected
    assert len(expected) < tokenizer.vocab_size  # so the map restricts something


def test_a_text_without_tokens_is_refused_by_name(toy, tmp_path):
    _, tokenizer, _, _ = toy
    empty = tmp_path / "empty.en"
    empty.write_text("\n\n")
    with pytest.raises(DataFormatError, match=f"{empty}: no tokens"):
        vmap.target_vocabulary_map(tokenizer, empty)


@pytest.mark.slow
def test_the_search_keeps_to_the_map_and_the_training_targets_change_nothing(
    toy, toy_targets, tmp_path
):
    model, tokenizer, test, _ = toy
    sources = [src for src, _ in test]
    options = dict(beam_size=4, n_best=1)
    full = Translator(model, tokenizer, device="cpu", engine="ct2").translate(sources, **options)
    mapped = Translator(model, tokenizer, device="cpu", engine="ct2", vmap_from=toy_targets)
    mapped = mapped.translate(sources, **options)
    assert [n[0][0] for n in mapped] == [n[0][0] for n in full]
    # The softmax runs over the candidates only: what the others held goes to them.
    assert all(m[0][1] >= f[0][1] for m, f in zip(mapped, full, strict=True))
    assert sum(m[0][1] - f[0][1] for m, f in zip(mapped, full, strict=True)) > 0

    # A map of one sentence's tokens: every output is made of them, so the map is in force.
    few = write_gz(tmp_path / "few.gz", [test[0][1]])
    allowed = set(tokenizer.encode_batch([test[0][1]])[0])
    narrow = Translator(model, tokenizer, device="cpu", engine="ct2", vmap_from=few)
    outputs = [n[0][0] for n in narrow.translate(sources, **options)]
    assert outputs != [n[0][0] for n in full]
    assert all(set(ids) <= allowed for ids in tokenizer.encode_batch(outputs))


@pytest.mark.slow
def test_nmt_export_writes_the_map_beside_the_model(toy, toy_targets, tmp_path):
    _, tokenizer, _, checkpoint = toy
    out = tmp_path / "ct2"
    export_main(["ct2", str(checkpoint), str(out), "--vmap-from", str(toy_targets)])
    written = (out / "vmap.txt").read_text()
    assert written == vmap.target_vocabulary_map(tokenizer, toy_targets)
    assert "use_vmap=True" in (out / "README.md").read_text()


def test_vmap_from_without_the_ct2_engine_is_refused(toy, toy_targets, capsys):
    _, _, _, checkpoint = toy
    with pytest.raises(SystemExit):
        translate_main([str(checkpoint), "--vmap-from", str(toy_targets)])
    assert "--vmap-from restricts CTranslate2's search: add --engine ct2" in capsys.readouterr().err


def test_a_vmap_file_that_is_not_text_is_an_error_naming_it(toy, tmp_path):
    _, _, _, checkpoint = toy
    bad = tmp_path / "train.en.gz"
    bad.write_text("plain text under a .gz name\n")
    with pytest.raises(SystemExit, match=f"error: {bad}: not gzip data"):
        translate_main([str(checkpoint), "--engine", "ct2", "--vmap-from", str(bad)])
