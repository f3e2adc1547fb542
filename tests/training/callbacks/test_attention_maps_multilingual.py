"""A multilingual run's attention maps: the decoder starts with each sentence's target language
tag, as training and translation start it, and the pictures and the explorer say so."""

import json

import lightning as L
import pytest
import torch

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.cli.plot_attention import explore_attention
from transformer_nmt.cli.plot_attention import main as plot_main
from transformer_nmt.data.framing import cut_at_eos, source_ids
from transformer_nmt.data.languages import LANGUAGES_KEY, Languages, tag_ids
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.decoding import beam_search
from transformer_nmt.explorer.plots import token_labels
from transformer_nmt.model import Transformer
from transformer_nmt.training.callbacks.attention_maps import AttentionMaps

LANGUAGES = Languages.from_config(["en", "de", "fr"])


class Validated(L.LightningModule):
    """What the callback reads of the TranslationModule: model, tokenizer, max_len_b."""

    def __init__(self, model, tokenizer, examples):
        super().__init__()
        self.save_hyperparameters({"max_len_b": 4})
        self.model, self.tokenizer, self.examples = model, tokenizer, examples

    def val_dataloader(self):
        return torch.utils.data.DataLoader(self.examples, batch_size=1, collate_fn=list)

    def validation_step(self, batch, batch_idx):
        pass


def test_the_decoder_reads_the_tag_of_each_sentence_s_target_language(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, 300, 1, language_tokens=LANGUAGES.tags)
    tags = tag_ids(tokenizer.tokens(), LANGUAGES)
    torch.manual_seed(0)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2).eval()
    (tokens,) = tokenizer.encode_batch(["one two three"])
    examples = [
        {"src": source_ids(tokens), "tgt": tokens, "src_text": "one two three",
         "tgt_text": "x", "bos_id": tags[lang]}
        for lang in ("de", "fr")
    ]  # fmt: skip
    callback = AttentionMaps(num_sentences=2, layers=[1], dirpath=str(tmp_path))
    trainer = L.Trainer(
        accelerator="cpu", logger=False, callbacks=[callback], default_root_dir=str(tmp_path),
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.validate(Validated(model, tokenizer, examples))
    (validation,) = [json.loads(p.read_text()) for p in tmp_path.glob("step*/explorer.json")]
    translations = []
    for lang, sentence in zip(("de", "fr"), validation["sentences"], strict=True):
        translation, reference = sentence["readings"]
        assert reference["tgt"] == token_labels(tokenizer, [tags[lang], *tokens])
        # The beam search the explorer shows starts from the tag too, as translation does.
        src = torch.tensor([source_ids(tokens)])
        ((best,),) = beam_search(model, src, tags[lang], EOS_ID, beam_size=4, max_len_b=4)
        expected = token_labels(tokenizer, [tags[lang], *cut_at_eos(best.tokens)])
        assert translation["tgt"] == expected
        translations.append(expected)
    assert translations[0][1:] != translations[1][1:]  # the tag changes what a random model writes
    assert sorted(p.name for p in tmp_path.glob("step*/*.png")) == [
        f"sentence{i}_{kind}_layer1.png" for i in range(2)
        for kind in ("decoder_self", "decoder_src", "encoder_self")
    ]  # fmt: skip


def test_a_tag_is_labelled_by_its_token_and_read_as_the_first_input():
    tokenizer = BPETokenizer.train(SENTENCES, 300, 1, language_tokens=LANGUAGES.tags)
    tags = tag_ids(tokenizer.tokens(), LANGUAGES)
    assert token_labels(tokenizer, [tags["fr"], EOS_ID]) == ["<2fr>", "</s>"]


@pytest.mark.parametrize("tag_side", ["target", "source"])
def test_nmt_plot_attention_frames_the_sentence_with_the_tag_asked_for(tmp_path, tag_side, capsys):
    languages = Languages.from_config(["en", "de", "fr"], tag_side=tag_side)
    tokenizer = BPETokenizer.train(SENTENCES, 300, 1, language_tokens=languages.tags)
    path = write_checkpoint(tmp_path / "m.ckpt", tokenizer)
    torch.save(torch.load(path, weights_only=True) | {LANGUAGES_KEY: languages.to_dict()}, path)
    html = tmp_path / "page.html"
    (sentence,) = explore_attention(path, ["one two"], html, tgt_lang="fr", max_len_b=3)
    first = sentence["readings"][0]["tgt"][0]
    assert (sentence["src"][0], first) == (
        ("<2fr>", "<s>") if tag_side == "source" else ("one", "<2fr>")
    )
    with pytest.raises(SystemExit, match="error: the model knows no language 'xx'; it knows en"):
        plot_main([str(path), "one two", "--html", str(html), "--tgt-lang", "xx"])
    with pytest.raises(SystemExit, match="translates into several languages: name one"):
        plot_main([str(path), "one two", "--html", str(html)])
