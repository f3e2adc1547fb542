"""A tiny M2M-100-shaped folder, as transformers saves facebook/m2m100_418M: random weights, a
SentencePiece model trained on a few lines, M2M100Tokenizer's files. Needs transformers and
sentencepiece."""

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch
import transformers

LINES = {
    "de": ["ein hund rennt über die wiese", "zwei kinder spielen im park", "eine frau liest"],
    "fr": ["un chien court sur l'herbe", "deux enfants jouent au parc", "une femme lit"],
    "en": ["a dog runs across the grass", "two children play in the park", "a woman reads"],
}


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    """A SentencePiece model with fairseq's ids: <s> 0, <pad> 1, </s> 2, <unk> 3."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        bos_id=0,
        pad_id=1,
        eos_id=2,
        unk_id=3,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return model.getvalue()


def perturb(model: transformers.M2M100ForConditionalGeneration) -> None:
    """Every weight random, LayerNorms included: no part left at its init."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if "layer_norm.weight" in name else 0.0, 0.3)


def write_m2m100_folder(folder: Path, **config: int | str) -> None:
    """The folder; `config` overrides M2M100Config's settings (d_model 16, 2 layers each)."""
    folder.mkdir(parents=True)
    lines = [line for lang in LINES.values() for line in lang] * 4
    model = train_spm(lines, 80)
    (folder / "sentencepiece.bpe.model").write_bytes(model)
    processor = spm.SentencePieceProcessor(model_proto=model)
    pieces = [processor.IdToPiece(i) for i in range(4, processor.GetPieceSize())]
    vocab = ["<s>", "<pad>", "</s>", "<unk>", *pieces]
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}))
    tokenizer = transformers.M2M100Tokenizer(
        str(folder / "vocab.json"), str(folder / "sentencepiece.bpe.model")
    )
    tokenizer.save_pretrained(folder)
    settings = dict(
        vocab_size=len(vocab) + len(tokenizer.lang_code_to_id) + 8,  # 8 madeupwords, as M2M-100
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        dropout=0.0,
        attention_dropout=0.0,
    )
    torch.manual_seed(0)
    m2m = transformers.M2M100ForConditionalGeneration(
        transformers.M2M100Config(**settings | config)
    )
    perturb(m2m)
    m2m.save_pretrained(folder)
