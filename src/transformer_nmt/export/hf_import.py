"""A MarianMT folder (OPUS-MT's, or `nmt-export hf`'s of an import) as a checkpoint: hf.py reversed;
an M2M-100 folder likewise (`m2m100.py`), NLLB's among them (`nllb.py`).

The folder is read from disk only (the user downloads it): `config.json`, the weights
(`model.safetensors` or `pytorch_model.bin`, read without pickle), and the SentencePiece
tokenizer as OPUS-MT ships it (`source.spm`, `target.spm`, `vocab.json`). Every setting of
`config.json` that the Transformer here lacks is refused before anything is written, naming the
key; what it takes maps exactly (hf.py's module docstring: the features, the vocabulary rows).
"""

import json
import os
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from torch import Tensor
from transformers import MarianConfig

from transformer_nmt.checkpoint import PREFIX, save_atomically
from transformer_nmt.data.languages import LANGUAGES_KEY, Languages
from transformer_nmt.data.sentencepiece_tokenizer import SentencePieceTokenizer
from transformer_nmt.data.tokenizer import PAD_ID, SubwordTokenizer
from transformer_nmt.data.tokenizer_kinds import M2M100_KINDS
from transformer_nmt.export import m2m100
from transformer_nmt.export.bart_family import ACTIVATIONS, head_problems, stack_settings
from transformer_nmt.export.hf import feature_order
from transformer_nmt.model import Transformer

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
# The model types read, and what each is.
MODEL_TYPES = {"marian": "MarianMT", m2m100.MODEL_TYPE: "M2M-100"}
EXAMPLE_REPOSITORIES = {
    "marian": "Helsinki-NLP/opus-mt-de-en",
    m2m100.MODEL_TYPE: "facebook/m2m100_418M",
}
# Keys of Marian (and BART) configs for layers the Transformer here lacks: on means refused.
ABSENT_LAYERS = {
    "normalize_before": "pre-norm layers; ours, as MarianMT's, are post-norm",
    "normalize_embedding": "a LayerNorm on the embeddings, which ours lack",
    "add_final_layer_norm": "a final LayerNorm per stack, which post-norm layers lack",
}


class ImportProblem(ValueError):
    """A folder that cannot become a checkpoint exactly; nothing was written."""


def architecture_problems(config: MarianConfig, tokenizer_config: dict[str, Any]) -> list[str]:
    """Each setting of the folder the Transformer here cannot hold, named by its config key."""
    problems = []
    for key, what in ABSENT_LAYERS.items():
        if getattr(config, key, False):
            problems.append(f"{key}=true: {what}")
    if not getattr(config, "static_position_embeddings", True):
        problems.append("static_position_embeddings=false: learned positions, ours are sinusoids")
    if not config.scale_embedding:
        problems.append("scale_embedding=false: ours scale embeddings by sqrt(d_model) always")
    if config.activation_function not in ACTIVATIONS:
        problems.append(
            f"activation_function={config.activation_function!r}: ours are "
            f"{', '.join(sorted(ACTIVATIONS))}"
        )
    problems += head_problems(config)
    if config.decoder_vocab_size not in (None, config.vocab_size):
        problems.append(
            f"decoder_vocab_size={config.decoder_vocab_size} differs from vocab_size="
            f"{config.vocab_size}: a separate decoder vocabulary, ours is one shared by both sides"
        )
    if tokenizer_config.get("separate_vocabs"):
        problems.append("separate_vocabs=true (tokenizer_config.json): ours is one vocabulary")
    if config.share_encoder_decoder_embeddings and not config.tie_word_embeddings:
        problems.append(
            "tie_word_embeddings=false with share_encoder_decoder_embeddings=true: ours ties "
            "all three matrices, the decoder's and the output, or none"
        )
    if config.decoder_start_token_id != config.pad_token_id:
        problems.append(
            f"decoder_start_token_id={config.decoder_start_token_id} is not pad_token_id="
            f"{config.pad_token_id}: OPUS-MT's decoder starts from <pad>, the row ours reads"
        )
    return problems


def tie_embeddings(config: MarianConfig) -> str:
    """Our `tie_embeddings` for Marian's two tying flags."""
    if config.share_encoder_decoder_embeddings:
        return "all"
    return "decoder" if config.tie_word_embeddings else "none"


def read_tokenizer(folder: Path, config: MarianConfig) -> SentencePieceTokenizer:
    """The folder's SentencePiece models and vocabulary, checked against config.json."""
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    pieces = sorted(vocab, key=vocab.get)
    if sorted(vocab.values()) != list(range(len(vocab))) or len(vocab) != config.vocab_size:
        raise ImportProblem(
            f"{folder / 'vocab.json'}: its {len(vocab)} ids are not 0..vocab_size-1 "
            f"(config.json's vocab_size={config.vocab_size})"
        )
    for key, piece in (("pad_token_id", "<pad>"), ("eos_token_id", "</s>")):
        if vocab.get(piece) != getattr(config, key):
            raise ImportProblem(
                f"{folder / 'config.json'}: {key}={getattr(config, key)} but vocab.json gives "
                f"{piece} the id {vocab.get(piece)}"
            )
    models = {side: (folder / f"{side}.spm").read_bytes() for side in ("source", "target")}
    try:
        return SentencePieceTokenizer(models, pieces)
    except (ValueError, RuntimeError) as e:  # RuntimeError: not a SentencePiece model
        raise ImportProblem(f"{folder}: its tokenizer is unusable: {e}") from e


def read_weights(folder: Path) -> dict[str, Tensor]:
    """MarianMTModel's state_dict from the folder's safetensors or (weights-only) torch file."""
    path = next(folder / name for name in WEIGHT_FILES if (folder / name).is_file())
    if path.suffix == ".safetensors":
        return safetensors.torch.load_file(path)
    return torch.load(path, map_location="cpu", weights_only=True)


def our_settings(config: MarianConfig, output_bias: bool) -> dict[str, Any]:
    """The TransformerConfig settings of the folder's network."""
    return stack_settings(config) | dict(
        tie_embeddings=tie_embeddings(config), output_bias=output_bias
    )


def our_state_dict(
    marian: dict[str, Tensor], config: MarianConfig, rows: list[int]
) -> dict[str, Tensor]:
    """Marian's weights under our names, features in our order, vocabulary `rows` (ours by id)."""
    inverse = torch.argsort(feature_order(config.d_model))
    marian = {key: t.float() for key, t in marian.items()}

    def first(*keys: str) -> Tensor:  # a tied matrix is saved under one of its names
        return next(marian[key] for key in keys if key in marian)

    def reads(t: Tensor) -> Tensor:  # (out, d_model): inputs back in our order
        return t[:, inverse]

    def writes(marian_name: str, ours_name: str) -> dict[str, Tensor]:
        return {
            f"{ours_name}.{k}": marian[f"{marian_name}.{k}"][inverse] for k in ("weight", "bias")
        }

    def attention(marian_name: str, ours_name: str, self_attention: bool) -> dict[str, Tensor]:
        def proj(p: str, k: str) -> Tensor:
            t = marian[f"{marian_name}.{p}_proj.{k}"]
            return reads(t) if k == "weight" else t

        out = writes(f"{marian_name}.out_proj", f"{ours_name}.w_o")
        for k in ("weight", "bias"):
            if self_attention:
                out[f"{ours_name}.w_qkv.{k}"] = torch.cat([proj(p, k) for p in "qkv"])
            else:
                out[f"{ours_name}.w_q.{k}"] = proj("q", k)
                out[f"{ours_name}.w_kv.{k}"] = torch.cat([proj(p, k) for p in "kv"])
        return out

    def feed_forward(marian_name: str, ours_name: str) -> dict[str, Tensor]:
        return {
            f"{ours_name}.w_1.weight": reads(marian[f"{marian_name}.fc1.weight"]),
            f"{ours_name}.w_1.bias": marian[f"{marian_name}.fc1.bias"],
            **writes(f"{marian_name}.fc2", f"{ours_name}.w_2"),
        }

    source = first("model.encoder.embed_tokens.weight", "model.shared.weight")
    target = first("model.decoder.embed_tokens.weight", "model.shared.weight")
    output = first("lm_head.weight", "model.decoder.embed_tokens.weight", "model.shared.weight")
    out = {
        "src_embed.lut.weight": reads(source)[rows],
        "tgt_embed.lut.weight": reads(target)[rows],
        "generator.weight": reads(output)[rows],
        "generator.bias": marian["final_logits_bias"][0, rows],
    }
    for i in range(config.encoder_layers):
        theirs, ours = f"model.encoder.layers.{i}", f"encoder.layers.{i}"
        out |= attention(f"{theirs}.self_attn", f"{ours}.self_attn", True)
        out |= writes(f"{theirs}.self_attn_layer_norm", f"{ours}.sublayer.0.norm")
        out |= feed_forward(theirs, f"{ours}.feed_forward")
        out |= writes(f"{theirs}.final_layer_norm", f"{ours}.sublayer.1.norm")
    for i in range(config.decoder_layers):
        theirs, ours = f"model.decoder.layers.{i}", f"decoder.layers.{i}"
        out |= attention(f"{theirs}.self_attn", f"{ours}.self_attn", True)
        out |= writes(f"{theirs}.self_attn_layer_norm", f"{ours}.sublayer.0.norm")
        out |= attention(f"{theirs}.encoder_attn", f"{ours}.src_attn", False)
        out |= writes(f"{theirs}.encoder_attn_layer_norm", f"{ours}.sublayer.1.norm")
        out |= feed_forward(theirs, f"{ours}.feed_forward")
        out |= writes(f"{theirs}.final_layer_norm", f"{ours}.sublayer.2.norm")
    return out


def read_folder(folder: str | os.PathLike) -> tuple[Transformer, SubwordTokenizer]:
    """The folder's network as our Transformer (eval mode) and its tokenizer; writes nothing.

    Reads a MarianMT folder (model_type "marian") or an M2M-100 one ("m2m_100", `m2m100.py`),
    with M2M-100's tokenizer or NLLB's.

    Raises:
        ImportProblem: a missing file, another model type, or settings the Transformer here
            lacks, each named.
    """
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ImportProblem(
            f"{folder}: not a transformers model folder, it lacks config.json; download the whole "
            "model repository (e.g. `hf download Helsinki-NLP/opus-mt-de-en --local-dir FOLDER`)"
        )
    raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    model_type = raw.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ImportProblem(
            f"{folder}: its config.json has model_type={model_type!r}; nmt-import hf reads "
            f"{', '.join(f'{t!r} ({what})' for t, what in MODEL_TYPES.items())} folders"
        )
    if model_type == "marian":
        missing = [name for name in TOKENIZER_FILES if not (folder / name).is_file()]
    else:
        missing = m2m100.missing_files(folder)
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        missing.append(" or ".join(WEIGHT_FILES))
    if missing:
        example = EXAMPLE_REPOSITORIES[model_type]
        raise ImportProblem(
            f"{folder}: not a {MODEL_TYPES[model_type]} folder as transformers saves them, it "
            f"lacks {', '.join(missing)}; download the whole model repository (e.g. `hf download "
            f"{example} --local-dir FOLDER`)"
        )
    if model_type == m2m100.MODEL_TYPE:
        try:
            return m2m100.read_folder(folder, raw, read_weights(folder))
        except (ValueError, OSError) as e:
            raise ImportProblem(str(e)) from e
    return read_marian(folder, raw)


def read_marian(folder: Path, raw: dict[str, Any]) -> tuple[Transformer, SentencePieceTokenizer]:
    """A MarianMT folder's network as our Transformer (eval mode) and its tokenizer."""
    config = MarianConfig.from_dict(raw)
    tokenizer_config_file = folder / "tokenizer_config.json"
    tokenizer_config = (
        json.loads(tokenizer_config_file.read_text(encoding="utf-8"))
        if tokenizer_config_file.is_file()
        else {}
    )
    problems = architecture_problems(config, tokenizer_config)
    if problems:
        raise ImportProblem(
            f"{folder}: the Transformer here cannot hold this model exactly: {'; '.join(problems)}"
        )
    tokenizer = read_tokenizer(folder, config)
    try:
        marian = read_weights(folder)
        output_bias = bool(marian["final_logits_bias"].any())
        weights = our_state_dict(marian, config, tokenizer.marian_rows())
    except (KeyError, StopIteration, RuntimeError, OSError) as e:
        raise ImportProblem(f"{folder}: its weights do not fit its config.json: {e!r}") from e
    model = Transformer(tokenizer.vocab_size, PAD_ID, **our_settings(config, output_bias))
    if not output_bias:
        weights.pop("generator.bias")
    try:
        model.load_state_dict(weights)
    except RuntimeError as e:
        raise ImportProblem(f"{folder}: its weights do not fit its config.json: {e}") from e
    return model.eval(), tokenizer


def folder_languages(tokenizer: SubwordTokenizer) -> Languages | None:
    """An M2M-100 (or NLLB) model's languages, every direction between them, each side tagged;
    None for MarianMT's, whose language codes (`>>fra<<`) are text of the source."""
    if isinstance(tokenizer, M2M100_KINDS):
        return Languages.from_config(tokenizer.languages, tag_side="both")
    return None


def import_hf(folder: str | os.PathLike, out: str | os.PathLike) -> dict[str, Any]:
    """Write the folder's model as a checkpoint at `out` (atomically) and return the checkpoint."""
    model, tokenizer = read_folder(folder)
    checkpoint = {
        "state_dict": {PREFIX + key: t for key, t in model.state_dict().items()},
        "model_config": model.config.to_dict(),
        "tokenizer": tokenizer.to_str(),
        "imported_from": str(folder),
    }
    if (languages := folder_languages(tokenizer)) is not None:
        checkpoint[LANGUAGES_KEY] = languages.to_dict()
    save_atomically(checkpoint, out)
    return checkpoint
