"""A checkpoint as a CTranslate2 model, built with ctranslate2's spec API from our weights.

CTranslate2's Transformer spec holds ours without conversion of any layout: the position table is
stored as it is (ours interleaves sin and cos, and learned tables work alike), post-norm and
pre-norm both exist, and our fused projections are the fused matrices CTranslate2 wants
([W^Q; W^K; W^V] for self-attention, [W^K; W^V] over the encoder output). The source framing of
`data/framing.py` (tokens, then EOS) is the model's `add_source_eos`, and decoding starts from
our BOS, so callers pass the source's BPE tokens alone. Refused (`formats.ct2_problems`): another
family, ReZero (its layers have no LayerNorm) and d_k != d_v.
"""

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import ctranslate2
import numpy as np
import torch
from ctranslate2.specs import common_spec, transformer_spec
from torch import Tensor

from transformer_nmt.data.framing import ADDED_TOKENS, TARGET_FRAME, source_ids
from transformer_nmt.data.tokenizer import PAD_ID, UNK_ID, SubwordTokenizer
from transformer_nmt.decoding.search import Hypothesis, length_penalty, ranked, scored
from transformer_nmt.export import ExportError
from transformer_nmt.export.formats import check_exportable
from transformer_nmt.model import Transformer
from transformer_nmt.runtime.atomic import write_atomically

LIBRARY = "ctranslate2"  # what loads the folder: the model card's library_name
ACTIVATIONS = {
    "relu": common_spec.Activation.RELU,
    "gelu": common_spec.Activation.GELU,
    "swish": common_spec.Activation.SWISH,
}
VMAP = "vmap.txt"  # the name CTranslate2 loads a vocabulary map from
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which our layers use

# The special ids as data/framing.py frames targets (and, for EOS, sources).
BOS, EOS = TARGET_FRAME["bos_id"], TARGET_FRAME["eos_id"]


def _array(t: Tensor) -> np.ndarray:
    # A copy: quantization rewrites the spec's arrays in place, and numpy() shares the memory.
    return t.detach().float().cpu().numpy().copy()


def _linear(spec: common_spec.LinearSpec, layer) -> None:
    spec.weight = _array(layer.weight)
    if layer.bias is not None:
        spec.bias = _array(layer.bias)


def _norm(spec: common_spec.LayerNormSpec, norm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _attention(spec, attention) -> None:
    """Our fused projections are CTranslate2's: linear[0] (and [1]) in, linear[-1] out."""
    if attention.self_attention:
        _linear(spec.linear[0], attention.w_qkv)
    else:
        _linear(spec.linear[0], attention.w_q)
        _linear(spec.linear[1], attention.w_kv)
    _linear(spec.linear[-1], attention.w_o)


def _feed_forward(spec, feed_forward, norm) -> None:
    _linear(spec.linear_0, feed_forward.w_1)
    _linear(spec.linear_1, feed_forward.w_2)
    _norm(spec.layer_norm, norm)


def _positions(spec, positions) -> None:
    """The table as the model adds it: fixed sinusoids (a buffer) or learned vectors."""
    table = positions.pe if hasattr(positions, "pe") else positions.embedding.weight
    spec.position_encodings.encodings = _array(table)


def transformer_spec_of(model: Transformer) -> transformer_spec.TransformerSpec:
    """The CTranslate2 spec of our model, weights filled in, in fp32."""
    check_exportable(model.config, "ct2")
    c = model.config
    # Each stack's depth is its own; the feed-forward widths follow from the weights' shapes.
    sizes = dict(
        num_heads=c.h, pre_norm=c.norm_first, activation=ACTIVATIONS[c.activation], head_dim=c.d_k
    )
    encoder = transformer_spec.TransformerEncoderSpec(c.N_enc, **sizes)
    decoder = transformer_spec.TransformerDecoderSpec(c.N_dec, **sizes)
    encoder.embeddings[0].weight = _array(model.src_embed.weight)
    decoder.embeddings.weight = _array(model.tgt_embed.weight)
    decoder.projection.weight = _array(model.generator.weight)
    if model.generator.bias is not None:  # model.output_bias
        decoder.projection.bias = _array(model.generator.bias)
    _positions(encoder, model.src_positions)
    _positions(decoder, model.tgt_positions)
    if c.norm_first:  # the final LayerNorm of each pre-norm stack
        _norm(encoder.layer_norm, model.encoder.norm)
        _norm(decoder.layer_norm, model.decoder.norm)
    for spec, layer in zip(encoder.layer, model.encoder.layers, strict=True):
        _attention(spec.self_attention, layer.self_attn)
        _norm(spec.self_attention.layer_norm, layer.sublayer[0].norm)
        _feed_forward(spec.ffn, layer.feed_forward, layer.sublayer[1].norm)
    for spec, layer in zip(decoder.layer, model.decoder.layers, strict=True):
        _attention(spec.self_attention, layer.self_attn)
        _norm(spec.self_attention.layer_norm, layer.sublayer[0].norm)
        _attention(spec.attention, layer.src_attn)
        _norm(spec.attention.layer_norm, layer.sublayer[1].norm)
        _feed_forward(spec.ffn, layer.feed_forward, layer.sublayer[2].norm)
    return transformer_spec.TransformerSpec(encoder, decoder)


def vocabulary(tokenizer: SubwordTokenizer) -> list[str]:
    """Token strings by id: what CTranslate2 reads and writes instead of ids."""
    return tokenizer.tokens()


def export_ct2(
    model: Transformer,
    tokenizer: SubwordTokenizer,
    out: str | os.PathLike,
    quantization: str = "float32",
    vocabulary_map: str | None = None,
) -> Path:
    """Write `out/`: CTranslate2's model.bin, config.json and vocabulary, and our tokenizer.json.

    Args:
        model: a trained Transformer.
        tokenizer: its tokenizer; saved as tokenizer.json for callers to make the tokens.
        out: the folder, created if missing; files of the same names are replaced.
        quantization: weight type, e.g. "int8", "int8_float32" or "float32".
        vocabulary_map: the text of a vmap.txt (`vmap.target_vocabulary_map`) to write beside
            the model, for `translate_batch(..., use_vmap=True)`.

    Raises:
        ExportError: a model CTranslate2 cannot express (`formats.ct2_problems`).
    """
    out = Path(out)
    spec = transformer_spec_of(model)
    tokens = vocabulary(tokenizer)
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    # The source framing of data/framing.py: tokens, then what source_ids appends (EOS).
    if source_ids([]) != [EOS]:
        raise ExportError(f"source framing {source_ids([])} is not CTranslate2's add_source_eos")
    spec.config.add_source_eos = True
    spec.config.bos_token, spec.config.eos_token = tokens[BOS], tokens[EOS]
    spec.config.unk_token = tokens[UNK_ID]
    spec.config.decoder_start_token = tokens[BOS]
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    spec.validate()
    spec.optimize(quantization=quantization)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    write_atomically(out / "tokenizer.json", tokenizer.to_str())
    if vocabulary_map is not None:
        write_atomically(out / VMAP, vocabulary_map)
    return out


class CT2Search:
    """Beam search by CTranslate2 on the model converted in memory, ranked by our length penalty.

    CTranslate2's beam search ranks by log-probability / |Y|^alpha, our "fairseq" form, and
    returns the beam's beam_size finished hypotheses; for the "gnmt" form they are ranked again
    here by log-probability / ((5 + |Y|) / 6)^alpha. PAD and BOS are never picked, as in ours.
    One maximum output length serves a whole batch: its longest source's + max_len_b (ours:
    each sentence's own).

    Args:
        model: a Transformer.
        tokenizer: its tokenizer.
        device: "cpu" or a CUDA device.
        quantization: the weights' type, e.g. "float32" or "int8".
        vocabulary_map: a vmap.txt's text; if given, the search scores only its candidates.
    """

    def __init__(
        self,
        model: Transformer,
        tokenizer: SubwordTokenizer,
        device: torch.device,
        quantization: str = "float32",
        vocabulary_map: str | None = None,
    ):
        self.max_positions = model.config.max_positions
        self.vocab = vocabulary(tokenizer)
        self.ids = {token: i for i, token in enumerate(self.vocab)}
        self.never = [[self.vocab[PAD_ID]], [self.vocab[BOS]]]
        self.use_vmap = vocabulary_map is not None
        threads = torch.get_num_threads()  # what --threads set
        # On a CPU, a worker per thread, each decoding whole batches on one core, outruns one
        # worker splitting each batch over the cores (experiments/export/README.md); a lone
        # batch then runs on one core.
        inter, intra = (threads, 1) if device.type == "cpu" else (1, threads)
        with tempfile.TemporaryDirectory() as folder:  # CTranslate2 reads it whole on loading
            export_ct2(model, tokenizer, folder, quantization, vocabulary_map)
            self.translator = ctranslate2.Translator(
                folder,
                device=device.type,
                device_index=device.index or 0,
                inter_threads=inter,
                intra_threads=intra,
            )

    def __call__(
        self,
        batches: list[list[list[int]]],
        beam_size: int,
        alpha: float,
        penalty: str,
        max_len_b: int,
        n_best: int,
    ) -> Iterator[list[list[Hypothesis]]]:
        length_penalty(1, alpha, penalty)  # fail on an unknown form before any work
        # Every batch is queued at once: CTranslate2's inter_threads workers decode them side by
        # side, and the results are read back in order. Queued last first: batches come shortest
        # first, and the longest, queued last, would leave the other workers idle at the end.
        pending = [self._submit(tokens, beam_size, alpha, max_len_b) for tokens in batches[::-1]]
        for results in pending[::-1]:
            yield [self._ranked(r.result(), alpha, penalty, n_best) for r in results]

    def _submit(
        self, tokens: list[list[int]], beam_size: int, alpha: float, max_len_b: int
    ) -> list[ctranslate2.AsyncTranslationResult]:
        # Cut as framing.source_ids cuts; the model appends EOS itself (add_source_eos).
        sources = [
            [self.vocab[i] for i in row[: self.max_positions - ADDED_TOKENS]] for row in tokens
        ]
        longest = max(len(row) for row in sources) + ADDED_TOKENS + max_len_b
        return self.translator.translate_batch(
            sources,
            beam_size=beam_size,
            num_hypotheses=beam_size,
            length_penalty=alpha,  # scores are log-probabilities / |Y|^alpha
            max_decoding_length=min(longest, self.max_positions),
            return_scores=True,
            return_end_token=True,  # |Y| counts EOS, as ours
            suppress_sequences=self.never,
            min_decoding_length=0,  # ours may end at once, with EOS first
            use_vmap=self.use_vmap,
            asynchronous=True,
        )

    def _ranked(
        self, result: ctranslate2.TranslationResult, alpha: float, penalty: str, n_best: int
    ) -> list[Hypothesis]:
        """One sentence's n_best hypotheses, ranked by our length penalty."""
        hypotheses = []
        for hypothesis, normalized in zip(result.hypotheses, result.scores, strict=True):
            ids = [self.ids[token] for token in hypothesis]
            log_prob = normalized * length_penalty(len(ids), alpha, "fairseq")
            hypotheses.append(scored(ids, log_prob, alpha, penalty))
        return ranked(hypotheses)[:n_best]


def usage() -> str:
    """The model card's section on loading the folder."""
    return """## Usage

```python
import ctranslate2
from tokenizers import Tokenizer
from torch import Tensor

tokenizer = Tokenizer.from_file("path/to/this/folder/tokenizer.json")
translator = ctranslate2.Translator("path/to/this/folder", device="cpu", intra_threads=2)
tokens = tokenizer.encode("A sentence to translate.", add_special_tokens=False).tokens
result = translator.translate_batch([tokens], beam_size=4, max_decoding_length=256)
ids = [tokenizer.token_to_id(t) for t in result[0].hypotheses[0]]
print(tokenizer.decode(ids))
```

If the folder holds `vmap.txt` (`nmt-export ct2 --vmap-from`), `translate_batch(...,
use_vmap=True)` scores only the target language's tokens, which is faster.

The model appends `</s>` to each source itself (`add_source_eos`) and starts decoding from `<s>`,
as in training. Its `length_penalty` divides by |Y|^alpha, what `nmt-translate --penalty
fairseq` does; `nmt-translate`'s default is the paper's GNMT form, ((5 + |Y|) / 6)^0.6.
"""
