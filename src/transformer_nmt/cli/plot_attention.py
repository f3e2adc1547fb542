"""Draw a checkpoint's attention on sentences: PNG files, or one interactive HTML page.

    nmt-plot-attention run/checkpoints/last.ckpt "Ein Hund rennt." --out attention/
    nmt-plot-attention last.ckpt "Ein Hund rennt." --reference "A dog runs." --layers 1 3
    nmt-plot-attention last.ckpt "Ein Hund rennt." "Zwei Katzen." --html explorer.html

A multilingual checkpoint takes --tgt-lang: its tag starts the decoder, as in translation.
Without --reference the decoder reads the model's own greedy translation; with it, the reference
is forced as decoder input (teacher forcing), which shows how the model aligns a given pair.
--html writes the explorer page: every layer and head to hover and choose, the alignment, and the
beam search that chose the translation (beam options as nmt-translate's); it prints each
sentence's 'line<TAB>score<TAB>translation' as `nmt-translate --n-best` does, then the page.
--layers chooses the layers of the PNGs and of the page alike. A sentence longer than the model's
positions is cut to fit, with a warning, as nmt-translate cuts it.
"""

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from transformer_nmt.checkpoint import CheckpointError, load_checkpoint, saved_languages
from transformer_nmt.cli.errors import exits_on
from transformer_nmt.cli.search_args import (
    add_device_arguments,
    check_device,
    finite_float,
    non_negative_int,
    positive_int,
    torch_dtype,
)
from transformer_nmt.data.framing import ADDED_TOKENS, source_ids
from transformer_nmt.explorer import explore_sentence, write_page
from transformer_nmt.explorer.plots import draw_sentence_attention
from transformer_nmt.inference.translator import language_frame

log = logging.getLogger(__name__)


def plot_attention(
    checkpoint: str | Path,
    source: str,
    out_dir: str | Path,
    reference: str | None = None,
    layers: list[int] | None = None,
    max_len_b: int = 50,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    tgt_lang: str | None = None,
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
        tgt_lang: a multilingual model's target language: its tag frames the sentence, as
            `nmt-translate --tgt-lang` frames it.
    """
    model, tokenizer = load_checkpoint(checkpoint)
    frame = language_frame(saved_languages(checkpoint), tokenizer.tokens, tgt_lang)
    model = model.to(device=device, dtype=dtype)
    (tokens,) = tokenizer.encode_batch([source])
    src_ids = fitted_source(tokens, model.config.max_positions, "the sentence", frame.source_prefix)
    tgt_tokens = None if reference is None else tokenizer.encode_batch([reference])[0]
    return draw_sentence_attention(
        model, tokenizer, src_ids, out_dir, tgt_tokens, max_len_b=max_len_b, layers=layers,
        bos_id=frame.bos_id,
    )  # fmt: skip


def fitted_source(
    tokens: list[int], max_positions: int, what: str, prefix: Sequence[int] = ()
) -> list[int]:
    """The source as the encoder reads it (after `prefix`, a source-side tag), cut with a
    warning (as nmt-translate) if too long."""
    limit = max_positions - ADDED_TOKENS - len(prefix)  # source tokens that fit beside EOS
    if len(tokens) > limit:
        log.warning(
            "%s: %d tokens, more than the model's %d; reading the first %d",
            what,
            len(tokens),
            limit,
            limit,
        )
    return source_ids(tokens, max_positions, prefix)


def explore_attention(
    checkpoint: str | Path,
    sources: list[str],
    html: str | Path,
    references: list[str] | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    layers: list[int] | None = None,
    tgt_lang: str | None = None,
    **search: Any,
) -> list[dict[str, Any]]:
    """Write the explorer page of `sources`; returns each sentence's data as the page holds it.

    Args:
        checkpoint, device, dtype, tgt_lang: as for `plot_attention`.
        sources: the sentences, raw text.
        html: the page to write.
        references: one target per source, each read by the decoder beside the translation.
        layers: 1-based layers the page shows; all if None.
        search: beam_size, alpha, penalty, max_len_b, as `beam_search` takes them.
    """
    if references is not None and len(references) != len(sources):
        raise ValueError(
            f"{len(references)} references for {len(sources)} sources: give one per source"
        )
    model, tokenizer = load_checkpoint(checkpoint)
    frame = language_frame(saved_languages(checkpoint), tokenizer.tokens, tgt_lang)
    model = model.to(device=device, dtype=dtype)
    sentences = []
    for i, source in enumerate(sources):
        (tokens,) = tokenizer.encode_batch([source])
        src_ids = fitted_source(
            tokens, model.config.max_positions, f"sentence {i + 1}", frame.source_prefix
        )
        reference = None if references is None else tokenizer.encode_batch([references[i]])[0]
        sentence = explore_sentence(
            model, tokenizer, src_ids, reference, layers=layers, bos_id=frame.bos_id, **search
        )
        sentences.append(sentence)
    write_page(html, [{"step": None, "sentences": sentences}], Path(checkpoint).name)
    return sentences


@exits_on(CheckpointError, OSError, ValueError)  # ValueError: a language the model lacks
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoint", type=Path, help="a .ckpt from training or nmt-average")
    parser.add_argument("source", nargs="+", help="the source sentence (several with --html)")
    parser.add_argument("--reference", nargs="+", help="force this target as decoder input")
    parser.add_argument("--out", type=Path, help="PNG folder (default: attention/ without --html)")
    parser.add_argument("--layers", type=int, nargs="+", help="1-based layers (default: all)")
    parser.add_argument("--html", type=Path, help="write the interactive explorer page here")
    parser.add_argument("--beam-size", type=positive_int, default=4, help="with --html (4)")
    parser.add_argument("--alpha", type=finite_float, default=0.6, help="with --html (0.6)")
    parser.add_argument("--penalty", choices=["gnmt", "fairseq"], default="gnmt")
    parser.add_argument(
        "--max-len-b",
        type=non_negative_int,
        default=50,
        help="outputs stop at source length + this",
    )
    parser.add_argument(
        "--tgt-lang",
        metavar="LANG",
        help="a multilingual model's language to translate into: its tag starts the decoder "
        "(or the source), as nmt-translate --tgt-lang (an unknown one is refused with the list)",
    )
    add_device_arguments(parser)
    args = parser.parse_args(argv)
    check_device(parser, args.device)
    references = args.reference
    if references is not None and len(references) != len(args.source):
        parser.error(f"{len(args.source)} sources but {len(references)} --reference: one each")
    out = args.out if args.out is not None or args.html is not None else Path("attention")
    if out is not None and len(args.source) > 1:
        parser.error("PNGs are drawn for one sentence: give one source, or --html without --out")
    if out is not None:
        paths = plot_attention(
            args.checkpoint,
            args.source[0],
            out,
            None if references is None else references[0],
            args.layers,
            args.max_len_b,
            device=args.device,
            dtype=torch_dtype(args),
            tgt_lang=args.tgt_lang,
        )
        for path in paths.values():
            print(path)
    if args.html is not None:
        search = dict(
            beam_size=args.beam_size,
            alpha=args.alpha,
            penalty=args.penalty,
            max_len_b=args.max_len_b,
        )
        sentences = explore_attention(
            args.checkpoint, args.source, args.html, references, args.device, torch_dtype(args),
            args.layers, args.tgt_lang, **search,
        )  # fmt: skip
        for i, sentence in enumerate(sentences):
            chosen = sentence["beam"]["chosen"]
            print(f"{i}\t{chosen['score']:.4f}\t{chosen['text']}")
        print(args.html)


if __name__ == "__main__":
    main()
