"""A checkpoint as a Hugging Face MarianMT folder: config, safetensors weights, fast tokenizer.

MarianMT is the post-norm Transformer of the paper, as ours, so the mapping is exact (a test holds
the logits within 1e-4 and greedy output token for token). Where the two differ:

- Positions. Ours interleave PE(pos, 2i) = sin, PE(pos, 2i+1) = cos; Marian puts all the sines in
  the first half of the vector and the cosines in the second (`MarianSinusoidalPositionalEmbedding`,
  which it recomputes on load and never saves), with the same angles. Nothing in a post-norm
  Transformer depends on the order of the d_model features: permuting them (evens, then odds) in
  every weight that reads or writes the residual stream gives the same network with Marian's
  position layout. LayerNorm is invariant to the order; its gain and bias are permuted alike.
- Embedding scale: both multiply embeddings by sqrt(d_model) (`scale_embedding=True`).
- Output: Marian adds `final_logits_bias`: ours with `model.output_bias`, else zeros.
- Tied weights: `tie_embeddings="all"` is `share_encoder_decoder_embeddings` plus
  `tie_word_embeddings`; "decoder" is the second alone; "none" neither.
- Framing: the exported tokenizer appends EOS to a source as `data/framing.py` does, and
  generation starts the decoder at our BOS. Search never picks PAD or BOS, as ours
  (`suppress_tokens`).
- Vocabulary: our BPE keeps our ids and becomes a fast tokenizer. An imported model's
  SentencePiece tokenizer goes back to Marian's ids, files and conventions (`source.spm`,
  `target.spm`, `vocab.json`; the decoder starts from `<pad>`, whose row is our BOS's), so that
  `nmt-import hf` reads the folder back to the same checkpoint.

What MarianMT cannot express is refused (`formats.marian_problems`): another family, ReZero,
pre-norm, learned positions, d_k or d_v other than d_model / h.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, processors
from torch import Tensor
from transformers import GenerationConfig, MarianConfig, MarianMTModel, PreTrainedTokenizerFast

from transformer_nmt.data.framing import TARGET_FRAME, source_ids
from transformer_nmt.data.m2m100_tokenizer import M2M100Tokenizer
from transformer_nmt.data.nllb_tokenizer import NllbTokenizer
from transformer_nmt.data.sentencepiece_tokenizer import SentencePieceTokenizer
from transformer_nmt.data.tokenizer import PAD_ID, SPECIAL_TOKENS, BPETokenizer, SubwordTokenizer
from transformer_nmt.data.tokenizer_kinds import M2M100_KINDS
from transformer_nmt.export import ExportError
from transformer_nmt.export.formats import check_exportable
from transformer_nmt.model import Transformer, TransformerConfig
from transformer_nmt.runtime.atomic import write_atomically

LIBRARY = "transformers"  # what loads the folder: the model card's library_name
# The special ids as data/framing.py frames targets (and, for EOS, sources).
BOS, EOS = TARGET_FRAME["bos_id"], TARGET_FRAME["eos_id"]


@dataclass(frozen=True)
class MarianIds:
    """The folder's vocabulary: our id of each of its rows, and its special ids."""

    rows: list[int]
    pad: int
    eos: int
    decoder_start: int
    suppress: list[int]  # never generated: not targets in training


def marian_ids(tokenizer: SubwordTokenizer) -> MarianIds:
    """Our ids for our BPE; Marian's own for an imported SentencePiece vocabulary."""
    if isinstance(tokenizer, SentencePieceTokenizer):
        pad, eos = (tokenizer.marian_vocab.index(t) for t in ("<pad>", "</s>"))
        return MarianIds(tokenizer.marian_ids(), pad, eos, pad, [pad])
    return MarianIds(list(range(tokenizer.vocab_size)), PAD_ID, EOS, BOS, [PAD_ID, BOS])


def marian_config(config: TransformerConfig, ids: MarianIds) -> MarianConfig:
    """The MarianConfig of the same network, with the folder's special-token ids."""
    return MarianConfig(
        vocab_size=len(ids.rows),
        decoder_vocab_size=len(ids.rows),
        max_position_embeddings=config.max_positions,
        d_model=config.d_model,
        encoder_layers=config.N_enc,
        decoder_layers=config.N_dec,
        encoder_attention_heads=config.h,
        decoder_attention_heads=config.h,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff_dec,
        activation_function=config.activation,  # "gelu" is the exact (erf) GELU in both
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        scale_embedding=True,
        share_encoder_decoder_embeddings=config.tie_embeddings == "all",
        tie_word_embeddings=config.tie_embeddings != "none",
        pad_token_id=ids.pad,
        bos_token_id=ids.decoder_start,
        eos_token_id=ids.eos,
        decoder_start_token_id=ids.decoder_start,
        forced_eos_token_id=ids.eos,
        architectures=["MarianMTModel"],
    )


def generation_config(config: TransformerConfig, ids: MarianIds) -> GenerationConfig:
    """`generate`'s defaults: beam 4 like ours, outputs within the position table.

    `length_penalty` divides by |Y|^alpha: our `penalty="fairseq"` with `alpha=1`, not the
    paper's GNMT form, which `generate` lacks. `early_stopping` ends a sentence's search once it
    has `num_beams` finished hypotheses, as ours does (transformers' default searches on, and
    changed 46 of Multi30k val's 1014 beam-4 outputs). `max_length` is per batch (ours: per
    sentence, the source length + max_len_b); at it, `forced_eos_token_id` makes the last token EOS.
    """
    return GenerationConfig(
        decoder_start_token_id=ids.decoder_start,
        bos_token_id=ids.decoder_start,
        eos_token_id=ids.eos,
        pad_token_id=ids.pad,
        forced_eos_token_id=ids.eos,
        # The decoder start and then at most max_positions tokens, as our search.
        max_length=config.max_positions + 1,
        num_beams=4,
        length_penalty=1.0,
        early_stopping=True,
        suppress_tokens=ids.suppress,  # never targets in training: our search skips them
    )


def feature_order(d_model: int, device: torch.device | str = "cpu") -> Tensor:
    """Marian's feature k is our feature order[k]: the sines (even features), then the cosines."""
    evens = torch.arange(0, d_model, 2, device=device)
    return torch.cat([evens, torch.arange(1, d_model, 2, device=device)])


def marian_state_dict(model: Transformer, rows: list[int]) -> dict[str, Tensor]:
    """Our weights under MarianMTModel's names, features in Marian's order, vocabulary `rows`."""
    # Host-side: the export is written from the CPU, wherever the model ran.
    ours = {key: t.detach().float().cpu() for key, t in model.state_dict().items()}
    p = feature_order(model.config.d_model)

    def reads(key: str) -> Tensor:  # (out, d_model) weights: permute the inputs
        return ours[key][:, p]

    def writes(name: str) -> dict[str, Tensor]:  # a layer whose outputs are d_model features
        return {"weight": ours[f"{name}.weight"][p], "bias": ours[f"{name}.bias"][p]}

    def norm(ours_name: str, marian_name: str) -> dict[str, Tensor]:
        return {f"{marian_name}.{k}": t for k, t in writes(ours_name).items()}

    def attention(ours_name: str, marian_name: str, self_attention: bool) -> dict[str, Tensor]:
        if self_attention:
            fused = {"q_proj": "w_qkv", "k_proj": "w_qkv", "v_proj": "w_qkv"}
            weights = reads(f"{ours_name}.w_qkv.weight").chunk(3)
            biases = ours[f"{ours_name}.w_qkv.bias"].chunk(3)
            projections = dict(zip(fused, zip(weights, biases, strict=True), strict=True))
        else:
            k, v = reads(f"{ours_name}.w_kv.weight").chunk(2)
            k_bias, v_bias = ours[f"{ours_name}.w_kv.bias"].chunk(2)
            projections = {
                "q_proj": (reads(f"{ours_name}.w_q.weight"), ours[f"{ours_name}.w_q.bias"]),
                "k_proj": (k, k_bias),
                "v_proj": (v, v_bias),
            }
        out = {}
        for proj, (weight, bias) in projections.items():
            out[f"{marian_name}.{proj}.weight"], out[f"{marian_name}.{proj}.bias"] = weight, bias
        for k, t in writes(f"{ours_name}.w_o").items():
            out[f"{marian_name}.out_proj.{k}"] = t
        return out

    def feed_forward(ours_name: str, marian_name: str) -> dict[str, Tensor]:
        return {
            f"{marian_name}.fc1.weight": reads(f"{ours_name}.w_1.weight"),
            f"{marian_name}.fc1.bias": ours[f"{ours_name}.w_1.bias"],
            **{f"{marian_name}.fc2.{k}": t for k, t in writes(f"{ours_name}.w_2").items()},
        }

    bias = ours.get("generator.bias", torch.zeros(model.config.vocab_size, device="cpu"))
    out = {
        "model.encoder.embed_tokens.weight": reads("src_embed.lut.weight")[rows],
        "model.decoder.embed_tokens.weight": reads("tgt_embed.lut.weight")[rows],
        "lm_head.weight": reads("generator.weight")[rows],
        "final_logits_bias": bias[rows][None],  # (1, vocab)
    }
    if model.config.tie_embeddings == "all":
        out["model.shared.weight"] = out["model.encoder.embed_tokens.weight"]
    for i in range(model.config.N_enc):
        ours_layer, marian = f"encoder.layers.{i}", f"model.encoder.layers.{i}"
        out |= attention(f"{ours_layer}.self_attn", f"{marian}.self_attn", True)
        out |= norm(f"{ours_layer}.sublayer.0.norm", f"{marian}.self_attn_layer_norm")
        out |= feed_forward(f"{ours_layer}.feed_forward", marian)
        out |= norm(f"{ours_layer}.sublayer.1.norm", f"{marian}.final_layer_norm")
    for i in range(model.config.N_dec):
        ours_layer, marian = f"decoder.layers.{i}", f"model.decoder.layers.{i}"
        out |= attention(f"{ours_layer}.self_attn", f"{marian}.self_attn", True)
        out |= norm(f"{ours_layer}.sublayer.0.norm", f"{marian}.self_attn_layer_norm")
        out |= attention(f"{ours_layer}.src_attn", f"{marian}.encoder_attn", False)
        out |= norm(f"{ours_layer}.sublayer.1.norm", f"{marian}.encoder_attn_layer_norm")
        out |= feed_forward(f"{ours_layer}.feed_forward", marian)
        out |= norm(f"{ours_layer}.sublayer.2.norm", f"{marian}.final_layer_norm")
    return out


def to_marian(model: Transformer, ids: MarianIds) -> MarianMTModel:
    """The same network as a MarianMTModel in eval mode, fp32."""
    check_exportable(model.config, "hf")
    marian = MarianMTModel(marian_config(model.config, ids))
    marian.generation_config = generation_config(model.config, ids)
    weights = marian_state_dict(model, ids.rows)
    missing, unexpected = marian.load_state_dict(weights, strict=False)
    # Marian recomputes its sinusoids instead of loading them.
    missing = [key for key in missing if not key.endswith("embed_positions.weight")]
    if missing or unexpected:
        raise ExportError(f"weights left unmapped: missing {missing}, unexpected {unexpected}")
    return marian.eval()


def fast_tokenizer(tokenizer: BPETokenizer, max_positions: int) -> PreTrainedTokenizerFast:
    """Our BPE as a `transformers` fast tokenizer that frames a source as `source_ids` does."""
    backend = Tokenizer.from_str(tokenizer.to_str())
    # What framing appends to a source, written as a template over the text's tokens ($A).
    appended = [(backend.id_to_token(i), i) for i in source_ids([])]
    backend.post_processor = processors.TemplateProcessing(
        single=" ".join(["$A", *(token for token, _ in appended)]), special_tokens=appended
    )
    pad, bos, eos, unk = SPECIAL_TOKENS
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=pad,
        bos_token=bos,
        eos_token=eos,
        unk_token=unk,
        model_max_length=max_positions,  # truncation=True cuts as source_ids does
        padding_side="right",
        # Ours decodes byte-level BPE back to the exact text: no space clean-up after it...
        clean_up_tokenization_spaces=False,
        # ...and text holding "</s>" stays text, as in BPETokenizer.
        split_special_tokens=True,
    )


def marian_tokenizer(tokenizer: SentencePieceTokenizer, out: Path) -> None:
    """Write what `transformers.MarianTokenizer` reads: both models, vocab.json, its config."""
    from transformers import MarianTokenizer

    out.mkdir(parents=True, exist_ok=True)
    for side in ("source", "target"):
        write_atomically(out / f"{side}.spm", tokenizer.models[side])
    vocab = {piece: i for i, piece in enumerate(tokenizer.marian_vocab)}
    write_atomically(out / "vocab.json", json.dumps(vocab, ensure_ascii=False, indent=2))
    files = (str(out / name) for name in ("source.spm", "target.spm", "vocab.json"))
    MarianTokenizer(*files).save_pretrained(out)


def export_hf(model: Transformer, tokenizer: SubwordTokenizer, out: str | os.PathLike) -> Path:
    """Write `out/`: config.json, generation_config.json, model.safetensors, the tokenizer.

    Args:
        model: a trained Transformer (in any dtype; exported in fp32).
        tokenizer: its tokenizer.
        out: the folder, created if missing; files of the same names are replaced.

    Raises:
        ExportError: a model MarianMT cannot express (`formats.marian_problems`), named with
            the setting and the formats that take it; a model with M2M-100's or NLLB's tokenizer
            is written as an M2M-100 folder (`m2m100.py`, `nllb.py`), or refused likewise.
    """
    out = Path(out)
    fairseq = model.config.positions == "fairseq"
    if fairseq != isinstance(tokenizer, M2M100_KINDS):
        raise ExportError(
            "an M2M-100 folder holds a model with fairseq's positions (model.positions=fairseq) "
            f"and M2M-100's or NLLB's vocabulary; this one has model.positions="
            f"{model.config.positions} and a {type(tokenizer).__name__}: export it as safetensors"
        )
    if fairseq:
        from transformer_nmt.export.m2m100 import export_m2m100

        return export_m2m100(model, tokenizer, out)
    marian = to_marian(model, marian_ids(tokenizer))
    marian.save_pretrained(out)
    if isinstance(tokenizer, SentencePieceTokenizer):
        marian_tokenizer(tokenizer, out)
        return out
    # tokenizer_config.json names the tokenizers backend, so AutoTokenizer loads this BPE rather
    # than the SentencePiece MarianTokenizer that config.json's model type would imply.
    fast_tokenizer(tokenizer, model.config.max_positions).save_pretrained(out)
    return out


def kind_and_usage(tokenizer: SubwordTokenizer) -> tuple[str, str]:
    """What `export_hf` writes for a model of this tokenizer, and its card's usage section."""
    if isinstance(tokenizer, NllbTokenizer):
        from transformer_nmt.export.nllb import usage as nllb_usage

        return "a Hugging Face transformers NLLB (M2M-100) model", nllb_usage()
    if isinstance(tokenizer, M2M100Tokenizer):
        from transformer_nmt.export.m2m100 import usage as m2m100_usage

        return "a Hugging Face transformers M2M-100 model", m2m100_usage()
    return "a Hugging Face transformers MarianMT model", usage()


def usage() -> str:
    """The model card's section on loading the folder."""
    return """## Usage

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")
model = AutoModelForSeq2SeqLM.from_pretrained("path/to/this/folder")
batch = tokenizer(["A sentence to translate."], return_tensors="pt", padding=True)
output = model.generate(**batch, num_beams=4, max_new_tokens=128)
print(tokenizer.batch_decode(output, skip_special_tokens=True))
```

The tokenizer appends `</s>` to a source and generation starts from `<s>`, as in training.
`generate`'s `length_penalty` divides by |Y|^alpha, what `nmt-translate --penalty fairseq` does;
`nmt-translate`'s default is the paper's GNMT form, ((5 + |Y|) / 6)^0.6, which `generate` lacks.
"""
