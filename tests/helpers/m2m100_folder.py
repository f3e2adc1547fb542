"""A tiny M2M-100-shaped folder, as transformers saves facebook/m2m100_418M: random weights, a
SentencePiece model trained on a few lines, M2M100Tokenizer's files; and an NLLB-shaped one, as
transformers saves facebook/nllb-200-*: the same network, NllbTokenizer's files. Needs
transformers and sentencepiece."""

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


# NLLB's language codes for LINES, in the order the tokenizer lists them.
NLLB_CODES = {"de": "deu_Latn", "fr": "fra_Latn", "en": "eng_Latn"}
# Model rows past the tokenizer's, as NLLB-200's 256206 rows hold 256204 tokens.
NLLB_SPARE_ROWS = 2
TINY_NETWORK = dict(
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


def train_spm(lines: list[str], vocab_size: int, **ids: int | str) -> bytes:
    """A SentencePiece model with fairseq's ids (<s> 0, <pad> 1, </s> 2, <unk> 3) unless `ids`
    set others (and e.g. model_type)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        **dict(bos_id=0, pad_id=1, eos_id=2, unk_id=3) | ids,
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
    # 8 madeupwords, as M2M-100
    rows = len(vocab) + len(tokenizer.lang_code_to_id) + 8
    write_network(folder, TINY_NETWORK | dict(vocab_size=rows) | config)


def write_network(folder: Path, settings: dict) -> None:
    """A random M2M100ForConditionalGeneration of `settings`, saved in `folder`."""
    torch.manual_seed(0)
    m2m = transformers.M2M100ForConditionalGeneration(transformers.M2M100Config(**settings))
    perturb(m2m)
    m2m.save_pretrained(folder)


def write_nllb_folder(folder: Path) -> Path:
    """An NLLB folder: a BPE SentencePiece model with NLLB's ids (<unk> 0, <s> 1, </s> 2, no
    <pad>) that transformers' NllbTokenizer converts and saves (tokenizer.json and its config)
    with NLLB_CODES, and a network with a row for each of its ids and NLLB_SPARE_ROWS more;
    returns where the SentencePiece model lies (outside the folder, as transformers leaves it)."""
    lines = [line for lang in LINES.values() for line in lang] * 4
    model = train_spm(lines, 80, model_type="bpe", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    source = folder.parent / f"{folder.name}-sentencepiece"
    source.mkdir(parents=True)
    (source / "sentencepiece.bpe.model").write_bytes(model)
    tokenizer = transformers.NllbTokenizer.from_pretrained(
        source, additional_special_tokens=list(NLLB_CODES.values())
    )
    tokenizer.save_pretrained(folder)
    rows = len(tokenizer) + NLLB_SPARE_ROWS
    write_network(folder, TINY_NETWORK | dict(vocab_size=rows))
    return source / "sentencepiece.bpe.model"


class NeverPadNorTag:
    """What our search never picks: PAD, and the decoder's first token (the target's tag) once
    `generate` has forced it; transformers' suppress_tokens would also suppress the forcing."""

    def __init__(self, pad: int, tag: int):
        self.never = [pad, tag]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.size(1) > 1:  # past </s>: the tag is forced at the first step
            scores[:, self.never] = float("-inf")
        return scores


def generate(model, tokenizer, text: str, tag: int, max_len_b: int) -> list[int]:
    """transformers' greedy output for `text` into the language of token `tag`, as its ids;
    stopped where our search stops."""
    batch = tokenizer([text], return_tensors="pt")
    output = model.generate(
        **batch,
        forced_bos_token_id=tag,
        num_beams=1,
        do_sample=False,
        # Random weights seldom end: both stop at source length + max_len_b, past the tag.
        max_new_tokens=batch.input_ids.size(1) + max_len_b + 1,
        logits_processor=transformers.LogitsProcessorList(
            [NeverPadNorTag(model.config.pad_token_id, tag)]
        ),
    )
    return output[0].tolist()
