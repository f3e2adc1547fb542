"""An OPUS-MT-shaped MarianMT folder built here, as an OPUS-MT repository holds it: config.json,
model.safetensors, source.spm and target.spm (SentencePiece with Marian's ids) and vocab.json.
Its weights are random: the workflow, not a download, is what it stands in for.

    python -m experiments.research_workflows.opus_shaped --data ../shared/data/multi30k \
        --out opus-shaped-de-en
"""

import argparse
import gzip
import io
import json
from collections.abc import Callable
from pathlib import Path

import sentencepiece as spm
import torch
import transformers


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    """A SentencePiece model with Marian's ids: </s> 0, <unk> 1, no <s> and no <pad>."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        eos_id=0,
        unk_id=1,
        bos_id=-1,
        pad_id=-1,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return model.getvalue()


def write_opus_folder(
    folder: Path,
    source: list[str],
    target: list[str],
    vocab_size: int,
    sizes: dict[str, int],
    init: Callable[[transformers.MarianMTModel], None] | None = None,
) -> None:
    """The folder, its SentencePiece models trained on `source` and `target` (`vocab_size` pieces
    a side at most, one joint vocabulary as OPUS-MT's), `sizes`: d_model, layers, heads, ffn_dim,
    and the decoder's own decoder_layers and decoder_ffn_dim where they differ.
    `init` changes the freshly initialized weights before they are saved."""
    folder.mkdir()
    models = {"source": train_spm(source, vocab_size), "target": train_spm(target, vocab_size)}
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
        d_model=sizes["d_model"],
        encoder_layers=sizes["layers"],
        decoder_layers=sizes.get("decoder_layers", sizes["layers"]),
        encoder_attention_heads=sizes["heads"],
        decoder_attention_heads=sizes["heads"],
        encoder_ffn_dim=sizes["ffn_dim"],
        decoder_ffn_dim=sizes.get("decoder_ffn_dim", sizes["ffn_dim"]),
        max_position_embeddings=sizes.get("max_positions", 256),
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
    if init is not None:
        init(marian)
    marian.save_pretrained(folder)
    files = (str(folder / name) for name in ("source.spm", "target.spm", "vocab.json"))
    transformers.MarianTokenizer(*files).save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of Multi30k's .gz files")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write (new)")
    parser.add_argument("--src", default="de")
    parser.add_argument("--tgt", default="en")
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args()

    def lines(lang: str) -> list[str]:
        with gzip.open(args.data / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            return f.read().splitlines()

    # model=narrow's sizes: 3+3 layers, d_model 192, 4 heads, d_ff 1024.
    sizes = dict(d_model=192, layers=3, heads=4, ffn_dim=1024)
    write_opus_folder(args.out, lines(args.src), lines(args.tgt), args.vocab_size, sizes)
    print(args.out)


if __name__ == "__main__":
    main()
