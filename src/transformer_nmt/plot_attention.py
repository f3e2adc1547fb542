"""Draw a checkpoint's attention on one sentence, as the training callback does, into PNG files.

    nmt-plot-attention run/checkpoints/last.ckpt "Ein Hund rennt." --out attention/
    nmt-plot-attention last.ckpt "Ein Hund rennt." --reference "A dog runs." --layers 1 3

Without --reference the decoder reads the model's own greedy translation; with it, the reference
is forced as decoder input (teacher forcing), which shows how the model aligns a given pair.
"""

import argparse
from pathlib import Path

import torch

from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID
from transformer_nmt.model import greedy_search
from transformer_nmt.plotting import attention_weights, draw_attention, token_labels


def plot_attention(
    checkpoint: str | Path,
    source: str,
    out_dir: str | Path,
    reference: str | None = None,
    layers: list[int] | None = None,
    max_len_b: int = 50,
) -> dict[str, Path]:
    """Write one PNG per attention kind and layer; returns {"<kind>/layer<l>": path}.

    Args:
        checkpoint: a .ckpt written by training (or nmt-average).
        source: the sentence to translate, raw text.
        out_dir: folder of the PNG files.
        reference: target text forced as decoder input; the greedy translation if None.
        layers: 1-based layers to draw; all if None.
        max_len_b: the greedy translation stops at source length + max_len_b tokens.
    """
    model, tokenizer = load_checkpoint(checkpoint)  # eval mode
    device = next(model.parameters()).device
    (src_ids,) = tokenizer.encode_batch([source])
    src = torch.tensor([*src_ids, EOS_ID], device=device)  # as in training: source ends in EOS
    if reference is None:
        with torch.no_grad():
            out = greedy_search(model, src[None], BOS_ID, EOS_ID, max_len_b)[0].tolist()
        tgt_ids = out[: out.index(EOS_ID)] if EOS_ID in out else out
    else:
        (tgt_ids,) = tokenizer.encode_batch([reference])
    tgt_in = torch.tensor([BOS_ID, *tgt_ids], device=device)
    return draw_attention(
        attention_weights(model, src, tgt_in),
        token_labels(tokenizer, src.tolist()),
        token_labels(tokenizer, tgt_in.tolist()),
        out_dir,
        layers=layers,
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
    args = parser.parse_args(argv)
    paths = plot_attention(args.checkpoint, args.source, args.out, args.reference, args.layers)
    for path in paths.values():
        print(path)


if __name__ == "__main__":
    main()
