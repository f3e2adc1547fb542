"""An OPUS-MT-shaped MarianMT folder built here: random weights, SentencePiece models trained on a
few lines, the files as OPUS-MT repositories hold them. Needs transformers and sentencepiece."""

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch
import transformers

GERMAN = ["ein hund rennt über die wiese", "zwei kinder spielen im park", "eine frau liest"] * 4
ENGLISH = ["a dog runs across the grass", "two children play in the park", "a woman reads"] * 4


def train_spm(lines: list[str]) -> bytes:
    """A SentencePiece model with Marian's ids: </s> 0, <unk> 1, no <s> and no <pad>."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=30,
        eos_id=0,
        unk_id=1,
        bos_id=-1,
        pad_id=-1,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return model.getvalue()


def write_opus_folder(folder: Path) -> None:
    """What an OPUS-MT repository holds: config.json, model.safetensors, both .spm, vocab.json."""
    folder.mkdir()
    models = {"source": train_spm(GERMAN), "target": train_spm(ENGLISH)}
    pieces = []
    for side, model in models.items():
        (folder / f"{side}.spm").write_bytes(model)
        processor = spm.SentencePieceProcessor(model_proto=model)
        pieces += [processor.IdToPiece(i) for i in range(2, processor.GetPieceSize())]
    vocab = ["</s>", "<unk>", *sorted(set(pieces)), "<pad>"]  # one vocabulary, <pad> last
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}))
    pad = len(vocab) - 1
    config = transformers.MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        activation_function="swish",
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        pad_token_id=pad,
        eos_token_id=0,
        bos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=0,
    )
    torch.manual_seed(0)
    marian = transformers.MarianMTModel(config)
    with torch.no_grad():  # every weight random, LayerNorms and the logits bias included
        for name, p in marian.named_parameters():
            p.normal_(1.0 if name.endswith("layer_norm.weight") else 0.0, 0.3)
        marian.final_logits_bias.normal_(0, 0.1)
    marian.save_pretrained(folder)
    files = (str(folder / name) for name in ("source.spm", "target.spm", "vocab.json"))
    transformers.MarianTokenizer(*files).save_pretrained(folder)
