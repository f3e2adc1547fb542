"""Attention heatmaps: one figure per layer and attention kind, a grid of its heads.

Shared by the `AttentionMaps` callback and the `nmt-plot-attention` command, which both call
`draw_sentence_attention`. Figures are built
with `matplotlib.figure.Figure` on the Agg canvas, never pyplot: no global state, no display,
safe in training processes and threads.
"""

import logging
import math
from pathlib import Path

import torch
from matplotlib.figure import Figure
from torch import Tensor

from transformer_nmt.data.framing import TARGET_FRAME, cut_at_eos, decoder_input
from transformer_nmt.data.tokenizer import SPECIAL_TOKENS, BPETokenizer
from transformer_nmt.decoding import greedy_search
from transformer_nmt.model import EncoderDecoder
from transformer_nmt.model.masks import padding_mask

log = logging.getLogger(__name__)

# The three attentions of the paper's section 3.2.3, in the order the data flows.
KINDS = {
    "encoder_self": "encoder self-attention",
    "decoder_self": "decoder self-attention (masked)",
    "decoder_src": "encoder-decoder attention",
}
MAX_COLS = 4  # heads per row of the grid
PANEL_INCHES = 2.4  # each head's heatmap: small figures draw fast (0.4 s a base-size layer)
MARGIN_INCHES = (1.0, 0.8)  # (width, height) for the colour bar and the title
DPI = 80


def grid_shape(h: int) -> tuple[int, int]:
    """(rows, columns) of the panel grid for h heads."""
    cols = min(h, MAX_COLS)
    return math.ceil(h / cols), cols


def figure_pixels(h: int) -> tuple[int, int]:
    """(width, height) in pixels of the PNG drawn for h heads: fixed, so tests can count panels."""
    rows, cols = grid_shape(h)
    return (
        round((cols * PANEL_INCHES + MARGIN_INCHES[0]) * DPI),
        round((rows * PANEL_INCHES + MARGIN_INCHES[1]) * DPI),
    )


def token_labels(tokenizer: BPETokenizer, ids: list[int]) -> list[str]:
    """Readable subword of each id: specials by name, a leading space shown as '▁'."""
    specials = dict(enumerate(SPECIAL_TOKENS))
    texts = tokenizer.decode_batch([[i] for i in ids])
    labels = [specials.get(i) or text.replace(" ", "▁") for i, text in zip(ids, texts, strict=True)]
    if "" in labels:  # a language tag (`<2fr>`), which decoding leaves out: shown by its token
        vocab = tokenizer.tokens()
        labels = [label or vocab[i] for i, label in zip(ids, labels, strict=True)]
    return labels


def attention_grid(
    weights: Tensor, query_tokens: list[str], key_tokens: list[str], title: str
) -> Figure:
    """Heatmaps of one layer's heads, colour scale 0..1 shared by all heads.

    Args:
        weights: (h, T_q, T_k) attention weights; each row sums to 1.
        query_tokens: T_q labels of the rows (the attending positions).
        key_tokens: T_k labels of the columns (the attended positions).
        title: names the attention, layer and step; each panel adds its head.
    """
    h = weights.size(0)
    rows, cols = grid_shape(h)
    width, height = figure_pixels(h)
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    axes = fig.subplots(rows, cols, squeeze=False)
    # Labels shrink with the sentence so that long ones stay legible rather than overlap.
    fontsize = max(3.0, min(7.0, 140 / max(len(query_tokens), len(key_tokens))))
    for head, ax in enumerate(axes.flat):
        if head >= h:
            ax.remove()
            continue
        image = ax.imshow(
            weights[head].float().cpu().numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto"
        )
        ax.set_title(f"head {head + 1}", fontsize=8)
        # Every head has the same tokens, so only the grid's outer edges are labelled: a tick per
        # token on every panel dominated the drawing time (experiments/speed/README.md).
        if head + cols >= h:  # nothing below it
            ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=fontsize)
        else:
            ax.set_xticks([])
        if head % cols == 0:
            ax.set_yticks(range(len(query_tokens)), query_tokens, fontsize=fontsize)
        else:
            ax.set_yticks([])
        ax.tick_params(length=0)
    fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(left=0.1, right=0.86, bottom=0.14, top=0.84, wspace=0.15, hspace=0.3)
    fig.colorbar(image, cax=fig.add_axes((0.9, 0.15, 0.02, 0.7)))
    return fig


def fit_target(ids: list[int], max_positions: int, what: str) -> list[int]:
    """Target ids cut, with a warning, so that BOS and they fit the model's positions."""
    limit = max_positions - 1
    if len(ids) > limit:
        log.warning(
            "%s: %d tokens, more than the decoder's %d positions hold after BOS; reading the "
            "first %d",
            what,
            len(ids),
            max_positions,
            limit,
        )
    return ids[:limit]


@torch.no_grad()
def attention_weights(
    model: EncoderDecoder, src: Tensor, tgt_in: Tensor
) -> dict[str, list[Tensor]]:
    """Every layer's attention weights for one sentence pair, teacher-forced.

    Args:
        model: in eval mode, or dropout blurs the weights.
        src: (S,) source ids ending in EOS, no padding.
        tgt_in: (T,) decoder input ids starting with BOS, no padding.

    Returns:
        For each kind of KINDS a list over layers of (h, T_q, T_k) weights.
    """
    src, tgt_in = src[None], tgt_in[None]  # (1, S), (1, T)
    memory, encoder_self = model.encode(src, need_weights=True)
    _, decoder_self, decoder_src = model.decode(
        tgt_in, memory, padding_mask(src, model.config.pad_id), need_weights=True
    )
    weights = {"encoder_self": encoder_self, "decoder_self": decoder_self}
    weights["decoder_src"] = decoder_src
    return {kind: [w[0] for w in layers] for kind, layers in weights.items()}


def draw_attention(
    weights: dict[str, list[Tensor]],
    src_tokens: list[str],
    tgt_tokens: list[str],
    out_dir: str | Path,
    step: int | None = None,
    layers: list[int] | None = None,
    prefix: str = "",
) -> dict[str, Path]:
    """Write one PNG per kind and layer; returns {"<kind>/layer<l>": path}.

    Args:
        weights: from `attention_weights`.
        src_tokens: labels of the source positions.
        tgt_tokens: labels of the decoder input positions (BOS first).
        out_dir: folder of the PNG files, created if missing.
        step: training step named in the titles, if any.
        layers: 1-based layers to draw; all if None.
        prefix: starts every file name, e.g. "sentence0_".
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    axes = {
        "encoder_self": (src_tokens, src_tokens),
        "decoder_self": (tgt_tokens, tgt_tokens),
        "decoder_src": (tgt_tokens, src_tokens),
    }
    at_step = "" if step is None else f", step {step}"
    paths = {}
    for kind, per_layer in weights.items():
        for layer, w in enumerate(per_layer, start=1):
            if layers is not None and layer not in layers:
                continue
            fig = attention_grid(w, *axes[kind], f"{KINDS[kind]}, layer {layer}{at_step}")
            path = out_dir / f"{prefix}{kind}_layer{layer}.png"
            fig.savefig(path)
            paths[f"{kind}/layer{layer}"] = path
    return paths


def draw_sentence_attention(
    model: EncoderDecoder,
    tokenizer: BPETokenizer,
    src_ids: list[int],
    out_dir: str | Path,
    tgt_tokens: list[int] | None = None,
    max_len_b: int = 50,
    step: int | None = None,
    layers: list[int] | None = None,
    prefix: str = "",
    bos_id: int = TARGET_FRAME["bos_id"],
) -> dict[str, Path]:
    """Draw every attention of the model on one sentence; returns {"<kind>/layer<l>": path}.

    The decoder reads `tgt_tokens` (teacher forcing) or, if None, the model's own greedy
    translation, so that the pictures show what the model attends to while it translates.

    Args:
        model: the model, put in eval mode while drawing and then back in its mode.
        tokenizer: the model's, for the axis labels.
        src_ids: the source as the encoder reads it (`framing.source_ids`).
        out_dir, step, layers, prefix: as in `draw_attention`.
        tgt_tokens: target token ids without BOS or EOS; None decodes greedily.
        max_len_b: the greedy translation stops at source length + max_len_b tokens.
        bos_id: the decoder's first token: BOS, or a multilingual model's target language tag
            (`framing.first_token` of a dataset example).
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()  # dropout would blur the weights
    try:
        src = torch.tensor(src_ids, device=device)  # (S,)
        if tgt_tokens is None:
            frame = TARGET_FRAME | {"bos_id": bos_id}
            out = greedy_search(model, src[None], **frame, max_len_b=max_len_b)  # (1, T)
            tgt_tokens = cut_at_eos(out[0].tolist())
        tgt_tokens = fit_target(tgt_tokens, model.config.max_positions, "the target")
        tgt_in = torch.tensor(decoder_input(tgt_tokens, bos_id), device=device)  # (T,)
        weights = attention_weights(model, src, tgt_in)
    finally:
        model.train(was_training)
    return draw_attention(
        weights,
        token_labels(tokenizer, src_ids),
        token_labels(tokenizer, tgt_in.tolist()),
        out_dir,
        step=step,
        layers=layers,
        prefix=prefix,
    )
