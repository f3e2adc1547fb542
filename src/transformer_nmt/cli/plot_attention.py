"""Draw a checkpoint's attention on one sentence, as the training callback does, into PNG files.

    nmt-plot-attention run/checkpoints/last.ckpt "Ein Hund rennt." --out attention/
    nmt-plot-attention last.ckpt "Ein Hund rennt." --reference "A dog runs." --layers 1 3

Without --reference the decoder reads the model's own greedy translation; with it, the reference
is forced as decoder input (teacher forcing), which shows how the model aligns a given pair.
"""

import argparse
from pathlib import Path

import torch

from transformer_nmt.attention_plots import draw_sentence_attention
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.cli.search_args import add_device_arguments, check_device, torch_dtype
from transformer_nmt.data.framing import source_ids


def plot_attention(
    checkpoint: str | Path,
    source: str,
    out_dir: str | Path,
    reference: str | None = None,
    layers: list[int] | None = None,
    max_len_b: int = 50,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
) -> dict[str, Path]:
    """Write one PNG per attention kind and layer; returns {"<kind>/layer<l>": path}.

    Args:
        checkpoint: a .ckpt written by training (or nmt-average).
        source: the sentence to translate, raw text.
        out_dir: folder of the PNG files.
        reference: target text forced as decoder input; the greedy translation if None.
        layers: 1-based layers to draw; all if None.
        max_len_b: the greedy translation stops at source length + max_len_b tokens.
        device: where the model runs.
        dtype: the weights' floating-point type; None keeps the checkpoint's.
    """
    model, tokenizer = load_checkpoint(checkpoint)
    model = model.to(device=device, dtype=dtype)
    (tokens,) = tokenizer.encode_batch([source])
    src_ids = source_ids(tokens, model.config.max_positions)
    tgt_tokens = None if reference is None else tokenizer.encode_batch([reference])[0]
    return draw_sentence_attention(
        model, tokenizer, src_ids, out_dir, tgt_tokens, max_len_b=max_len_b, layers=layers
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", type=Path, help="a .ckpt from training or nmt-average")
    parser.add_argument("source", help="the source sentence")
    parser.add_argument("--reference", help="force this target as decoder input")
    parser.add_argument("--out", type=Path, default=Path("attention"), help="PNG folder")
    parser.add_argument("--layers", type=int, nargs="+", help="1-based layers (default: all)")
    add_device_arguments(parser)
    args = parser.parse_args(argv)
    check_device(parser, args.device)
    paths = plot_attention(
        args.checkpoint,
        args.source,
        args.out,
        args.reference,
        args.layers,
        device=args.device,
        dtype=torch_dtype(args),
    )
    for path in paths.values():
        print(path)


if __name__ == "__main__":
    main()
