"""What the explorer page shows of one sentence, as plain JSON-ready values."""

import base64
from typing import Any

import numpy as np
import torch
from torch import Tensor

from transformer_nmt.data.framing import TARGET_FRAME, cut_at_eos, decoder_input
from transformer_nmt.data.tokenizer import BOS_ID, BPETokenizer
from transformer_nmt.decoding import beam_search
from transformer_nmt.decoding.beam_trace import BeamTrace
from transformer_nmt.explorer.plots import attention_weights, token_labels
from transformer_nmt.model import EncoderDecoder

# Weights travel as uint16 steps of 1/65535: 2.7 base64 characters each, within 1e-5.
LEVELS = 65535
STATUS_CODES = {"kept": "k", "finished": "f", "pruned": "p"}


def encode_weights(per_layer: list[Tensor]) -> dict[str, Any]:
    """A list over layers of (h, T_q, T_k) weights -> {"shape": [L, h, T_q, T_k], "data": base64}.

    The data are little-endian uint16 of round(weight * LEVELS), layer-major.
    """
    if not per_layer:
        return {"shape": [0, 0, 0, 0], "data": ""}
    stacked = torch.stack(per_layer).float().clamp(0, 1).cpu().numpy()  # (L, h, T_q, T_k)
    levels = np.rint(stacked * LEVELS).astype("<u2")
    return {"shape": list(stacked.shape), "data": base64.b64encode(levels.tobytes()).decode()}


def decode_weights(encoded: dict[str, Any]) -> np.ndarray:
    """The (L, h, T_q, T_k) float32 weights `encode_weights` wrote."""
    levels = np.frombuffer(base64.b64decode(encoded["data"]), dtype="<u2")
    return (levels.astype(np.float32) / LEVELS).reshape(encoded["shape"])


def beam_steps(trace: BeamTrace, sentence: int) -> list[list[list]]:
    """Per step, its candidates as [beam, token, log_prob, status code, score or None]."""
    return [
        [[c.beam, c.token, c.log_prob, STATUS_CODES[c.status], c.score] for c in step]
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
    bos_id: int = BOS_ID,
) -> dict[str, Any]:
    """Beam-search one sentence with a trace, and read every attention weight of its translation.

    The decoder reads the chosen translation and, if given, the reference (teacher forcing):
    one "reading" each, both beside the encoder's self-attention, which they share.

    Args:
        model: the model, put in eval mode meanwhile and then back in its mode.
        tokenizer: the model's, for the labels.
        src_ids: the source as the encoder reads it (`framing.source_ids`).
        reference: target token ids without BOS or EOS.
        beam_size, alpha, penalty, max_len_b: as for `beam_search`.
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
        targets = {"translation": cut_at_eos(best.tokens)}
        if reference is not None:
            targets["reference"] = reference
        weights = {
            name: attention_weights(
                model, src, torch.tensor(decoder_input(ids, bos_id), device=device)
            )
            for name, ids in targets.items()
        }
    finally:
        model.train(was_training)
    steps = beam_steps(trace, 0)
    beam_ids = sorted({c[1] for step in steps for c in step})
    readings = [
        {
            "name": name,
            "tgt": token_labels(tokenizer, decoder_input(ids, bos_id)),
            "text": tokenizer.decode_batch([ids])[0],
            "decoder_self": encode_weights(weights[name]["decoder_self"]),
            "decoder_src": encode_weights(weights[name]["decoder_src"]),
        }
        for name, ids in targets.items()
    ]
    return {
        "src": token_labels(tokenizer, src_ids),
        "source": tokenizer.decode_batch([cut_at_eos(src_ids)])[0],
        "encoder_self": encode_weights(weights["translation"]["encoder_self"]),
        "readings": readings,
        "beam": {
            "steps": steps,
            "vocab": dict(zip(map(str, beam_ids), token_labels(tokenizer, beam_ids), strict=True)),
            "chosen": {
                "tokens": best.tokens,
                "score": best.score,
                "text": tokenizer.decode_batch([best.tokens])[0],  # as nmt-translate prints it
            },
            "options": options,
        },
    }
