"""What the explorer page shows of one sentence, as plain JSON-ready values."""

import base64
import zlib
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_nmt.data.framing import (
    TARGET_FRAME,
    cut_at_eos,
    decoder_input,
    decoder_target,
)
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.decoding import beam_search
from transformer_nmt.decoding.beam_trace import BeamTrace
from transformer_nmt.explorer.plots import attention_weights, fit_target, token_labels
from transformer_nmt.model import EncoderDecoder

# A weight w travels as q = round(255 sqrt(w)), one byte, deflated: the square root keeps small
# weights apart (0.004 and 0.006 differ) where a linear byte would round both to 1/255; the error
# is at most 1/255 (near w = 1), finer than the colour scale shows.
LEVELS = 255
CODING = "sqrt-u8-deflate"
OLD_LEVELS = 65535  # pages before CODING: little-endian uint16 of round(w * OLD_LEVELS)
STATUS_CODES = {"kept": "k", "finished": "f", "pruned": "p"}


def encode_weights(per_layer: list[Tensor] | np.ndarray) -> dict[str, Any]:
    """A list over layers of (h, T_q, T_k) weights -> {"shape": [L, h, T_q, T_k], "data": ...}.

    The data are base64 of the zlib-deflated bytes round(LEVELS * sqrt(weight)), layer-major.
    """
    if len(per_layer) == 0:
        return {"shape": [0, 0, 0, 0], "coding": CODING, "data": ""}
    if isinstance(per_layer, np.ndarray):
        stacked = per_layer.astype(np.float32)
    else:
        stacked = torch.stack(list(per_layer)).float().cpu().numpy()  # (L, h, T_q, T_k)
    levels = np.rint(np.sqrt(stacked.clip(0, 1)) * LEVELS).astype(np.uint8)
    data = base64.b64encode(zlib.compress(levels.tobytes(), 9)).decode()
    return {"shape": list(stacked.shape), "coding": CODING, "data": data}


def decode_weights(encoded: dict[str, Any]) -> np.ndarray:
    """The (L, h, T_q, T_k) float32 weights `encode_weights` (or an older page) wrote."""
    if not encoded["data"]:
        return np.zeros(encoded["shape"], dtype=np.float32)
    if encoded.get("coding") != CODING:
        levels = np.frombuffer(base64.b64decode(encoded["data"]), dtype="<u2")
        return (levels.astype(np.float32) / OLD_LEVELS).reshape(encoded["shape"])
    levels = np.frombuffer(zlib.decompress(base64.b64decode(encoded["data"])), dtype=np.uint8)
    return ((levels.astype(np.float32) / LEVELS) ** 2).reshape(encoded["shape"])


def beam_steps(trace: BeamTrace, sentence: int) -> list[list[list]]:
    """Per step, its candidates as [beam, token, score, status code, normalized or None]."""
    return [
        [[c.beam, c.token, c.score, STATUS_CODES[c.status], c.normalized] for c in step]
        for step in trace.steps[sentence]
    ]


@torch.no_grad()
def explore_sentence(
    model: EncoderDecoder,
    tokenizer: BPETokenizer,
    src_ids: list[int],
    reference: list[int] | None = None,
    beam_size: int = 4,
    alpha: float = 0.6,
    penalty: str = "gnmt",
    max_len_b: int = 50,
    layers: list[int] | None = None,
    bos_id: int = TARGET_FRAME["bos_id"],
) -> dict[str, Any]:
    """Beam-search one sentence with a trace, and read every attention weight of its translation.

    The decoder reads the chosen translation and, if given, the reference (teacher forcing):
    one "reading" each, both beside the encoder's self-attention, which they share. A target
    longer than the decoder's positions is cut to fit, with a warning.

    Args:
        model: the model, put in eval mode meanwhile and then back in its mode.
        tokenizer: the model's, for the labels.
        src_ids: the source as the encoder reads it (`framing.source_ids`).
        reference: target token ids without BOS or EOS.
        beam_size, alpha, penalty, max_len_b: as for `beam_search`.
        layers: 1-based layers kept on the page; all if None.
        bos_id: the decoder's first token: BOS, or a multilingual model's target language tag.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()  # dropout would blur the weights and change the search
    try:
        src = torch.tensor(src_ids, device=device)  # (S,)
        trace = BeamTrace()
        options = dict(beam_size=beam_size, alpha=alpha, penalty=penalty, max_len_b=max_len_b)
        frame = TARGET_FRAME | {"bos_id": bos_id}
        ((best,),) = beam_search(model, src[None], **frame, **options, trace=trace)
        whole = {"translation": cut_at_eos(best.tokens)}
        if reference is not None:
            whole["reference"] = reference
        limit = model.config.max_positions
        targets = {name: fit_target(ids, limit, f"the {name}") for name, ids in whole.items()}
        weights = {
            name: attention_weights(
                model, src, torch.tensor(decoder_input(ids, bos_id), device=device)
            )
            for name, ids in targets.items()
        }
    finally:
        model.train(was_training)
    count = len(weights["translation"]["decoder_src"])  # every model family has this one
    kept = [layer for layer in range(1, count + 1) if layers is None or layer in layers]
    weights = {name: keep_layers(w, kept) for name, w in weights.items()}
    steps = beam_steps(trace, 0)
    beam_ids = sorted({c[1] for step in steps for c in step})
    readings = [
        {
            "name": name,
            "tgt": token_labels(tokenizer, decoder_input(ids, bos_id)),
            # What each decoder position predicts: the row labels of every target view.
            "out": token_labels(tokenizer, decoder_target(whole[name])[: len(ids) + 1]),
            "text": tokenizer.decode_batch([ids])[0],
            "decoder_self": encode_weights(weights[name]["decoder_self"]),
            "decoder_src": encode_weights(weights[name]["decoder_src"]),
        }
        for name, ids in targets.items()
    ]
    return {
        "src": token_labels(tokenizer, src_ids),
        "source": tokenizer.decode_batch([cut_at_eos(src_ids)])[0],
        "layers": kept,
        "encoder_self": encode_weights(weights["translation"]["encoder_self"]),
        "readings": readings,
        "beam": {
            "steps": steps,
            "vocab": dict(zip(map(str, beam_ids), token_labels(tokenizer, beam_ids), strict=True)),
            "chosen": {
                "tokens": best.tokens,
                "score": best.score,
                "normalized": best.normalized,
                "text": tokenizer.decode_batch([best.tokens])[0],  # as nmt-translate prints it
            },
            "options": options,
        },
    }


def keep_layers(weights: dict[str, list[Tensor]], kept: list[int]) -> dict[str, list[Tensor]]:
    """Each kind's weights of the 1-based layers `kept` (those a kind has: an RNN's are fewer)."""
    return {
        kind: [per_layer[layer - 1] for layer in kept if layer <= len(per_layer)]
        for kind, per_layer in weights.items()
    }
