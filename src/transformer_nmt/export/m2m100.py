"""An M2M-100 folder (transformers' M2M100ForConditionalGeneration) as our Transformer, and back.

M2M-100 is fairseq's pre-norm Transformer, which ours holds exactly with these switches:

- `norm_first=true`: pre-norm layers and a final LayerNorm per stack (`encoder.layer_norm`,
  `decoder.layer_norm`).
- `positions="fairseq"`: its sinusoids (sines then cosines, frequencies over d_model / 2 - 1,
  positions from padding_idx + 1 = 2), recomputed on load and never saved, as transformers does.
  Transformers numbers padded positions apart; they are masked, so no output depends on them.
- `decoder_start`: the decoder reads `</s>` (decoder_start_token_id) before the language tag that
  `generate` forces (forced_bos_token_id): our tag in BOS's place (`tag_side="both"`), with the
  source's own tag before the source, as M2M100Tokenizer frames it (`__en__ tokens </s>`).
- One embedding matrix for source, target and output (`tie_embeddings="all"`), scaled by
  sqrt(d_model); no output bias.
- Vocabulary: `data/m2m100_tokenizer.py`, its language tokens our tags (`<2de>`); an NLLB
  folder's is `nllb.py`'s (`deu_Latn` is `<2deu_Latn>`), the network the same.

Settings ours lacks are refused by config key before anything is written. LayerDrop
(encoder_layerdrop, decoder_layerdrop) skips layers in training only: imported, inference is
exact, and fine-tuning here runs every layer.
"""

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration
from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

from transformer_nmt.data.m2m100_tokenizer import M2M100Tokenizer, language_token
from transformer_nmt.data.nllb_tokenizer import NllbTokenizer
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.export import ExportError, nllb
from transformer_nmt.export.bart_family import ACTIVATIONS, head_problems, stack_settings
from transformer_nmt.export.formats import check_exportable
from transformer_nmt.model import Transformer, TransformerConfig
from transformer_nmt.runtime.atomic import write_atomically

MODEL_TYPE = "m2m_100"
TOKENIZER_FILES = ("sentencepiece.bpe.model", "vocab.json")
# fairseq's dictionary puts <pad> at 1, and its positions count from padding_idx + 1.
FAIRSEQ_PAD = 1


def missing_files(folder: Path) -> list[str]:
    """The tokenizer files the folder lacks: NLLB's (`nllb.is_nllb`) or M2M-100's."""
    if nllb.is_nllb(folder):
        return nllb.missing_files(folder)
    return [name for name in TOKENIZER_FILES if not (folder / name).is_file()]


def architecture_problems(config: M2M100Config) -> list[str]:
    """Each setting of the folder the Transformer here cannot hold, named by its config key."""
    problems = []
    if config.activation_function not in ACTIVATIONS:
        problems.append(
            f"activation_function={config.activation_function!r}: ours are "
            f"{', '.join(sorted(ACTIVATIONS))}"
        )
    if not config.scale_embedding:
        problems.append("scale_embedding=false: ours scale embeddings by sqrt(d_model) always")
    if not config.tie_word_embeddings:
        problems.append(
            "tie_word_embeddings=false: M2M-100's embeddings are one matrix for source and "
            "target; ours ties the output projection to them too, or ties none"
        )
    problems += head_problems(config)
    if config.d_model < 4 or config.d_model % 2:
        problems.append(
            f"d_model={config.d_model}: fairseq's sinusoids here need an even d_model >= 4"
        )
    if config.pad_token_id != FAIRSEQ_PAD:
        problems.append(
            f"pad_token_id={config.pad_token_id}: positions here count from 2, fairseq's "
            f"padding_idx {FAIRSEQ_PAD} + 1"
        )
    return problems


def read_tokenizer(folder: Path, config: M2M100Config) -> M2M100Tokenizer:
    """The folder's SentencePiece model, vocabulary and language tokens, checked against config."""
    tokenizer_config_file = folder / "tokenizer_config.json"
    tokenizer_config = (
        json.loads(tokenizer_config_file.read_text(encoding="utf-8"))
        if tokenizer_config_file.is_file()
        else {}
    )
    codes = tokenizer_config.get("language_codes", "m2m100")
    if codes not in FAIRSEQ_LANGUAGE_CODES:
        raise ValueError(
            f"{tokenizer_config_file}: language_codes={codes!r}, not one of "
            f"{', '.join(FAIRSEQ_LANGUAGE_CODES)}"
        )
    languages = FAIRSEQ_LANGUAGE_CODES[codes]
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise ValueError(f"{folder / 'vocab.json'}: its ids are not 0..{len(vocab) - 1}")
    fillers = config.vocab_size - len(vocab) - len(languages)
    if fillers < 0:
        raise ValueError(
            f"{folder / 'config.json'}: vocab_size={config.vocab_size} is fewer than vocab.json's "
            f"{len(vocab)} pieces and the {len(languages)} language tokens of language_codes="
            f"{codes!r}"
        )
    pieces = sorted(vocab, key=vocab.get)
    folder_vocab = [
        *pieces,
        *(language_token(lang) for lang in languages),
        *(f"madeupword{i:04d}" for i in range(fillers)),
    ]
    for key, piece in (("pad_token_id", "<pad>"), ("eos_token_id", "</s>")):
        if vocab.get(piece) != getattr(config, key):
            raise ValueError(
                f"{folder / 'config.json'}: {key}={getattr(config, key)} but vocab.json gives "
                f"{piece} the id {vocab.get(piece)}"
            )
    model = (folder / "sentencepiece.bpe.model").read_bytes()
    try:
        return M2M100Tokenizer(model, folder_vocab, languages, codes)
    except (ValueError, RuntimeError) as e:  # RuntimeError: not a SentencePiece model
        raise ValueError(f"{folder}: its tokenizer is unusable: {e}") from e


def our_settings(config: M2M100Config, decoder_start: int) -> dict[str, Any]:
    """The TransformerConfig settings of the folder's network."""
    return stack_settings(config) | dict(
        norm_first=True, positions="fairseq", tie_embeddings="all", decoder_start=decoder_start
    )


def name_pairs(n_enc: int, n_dec: int) -> list[tuple[str, str]]:
    """(ours, theirs) module names of every weight and bias mapped one to one."""
    pairs = [
        ("encoder.norm", "model.encoder.layer_norm"),
        ("decoder.norm", "model.decoder.layer_norm"),
    ]
    for stack, n, norms in (
        ("encoder", n_enc, ("self_attn_layer_norm", "final_layer_norm")),
        ("decoder", n_dec, ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm")),
    ):
        for i in range(n):
            ours, theirs = f"{stack}.layers.{i}", f"model.{stack}.layers.{i}"
            pairs += [(f"{ours}.sublayer.{j}.norm", f"{theirs}.{t}") for j, t in enumerate(norms)]
            pairs += [(f"{ours}.feed_forward.w_1", f"{theirs}.fc1")]
            pairs += [(f"{ours}.feed_forward.w_2", f"{theirs}.fc2")]
            pairs += [(f"{ours}.self_attn.w_o", f"{theirs}.self_attn.out_proj")]
            if stack == "decoder":
                pairs += [(f"{ours}.src_attn.w_o", f"{theirs}.encoder_attn.out_proj")]
                pairs += [(f"{ours}.src_attn.w_q", f"{theirs}.encoder_attn.q_proj")]
    return pairs


def fused(n_enc: int, n_dec: int) -> list[tuple[str, list[str]]]:
    """(ours, theirs) of the fused projections: self-attention's q, k, v; cross-attention's k, v."""
    out = []
    for stack, n in (("encoder", n_enc), ("decoder", n_dec)):
        for i in range(n):
            ours, theirs = f"{stack}.layers.{i}", f"model.{stack}.layers.{i}"
            out.append((f"{ours}.self_attn.w_qkv", [f"{theirs}.self_attn.{p}_proj" for p in "qkv"]))
            if stack == "decoder":
                out.append(
                    (f"{ours}.src_attn.w_kv", [f"{theirs}.encoder_attn.{p}_proj" for p in "kv"])
                )
    return out


def our_state_dict(theirs: dict[str, Tensor], n_enc: int, n_dec: int, rows: list[int]) -> dict:
    """M2M100's weights under our names, vocabulary `rows` (the folder's id of each of ours)."""
    theirs = {key: t.float() for key, t in theirs.items()}
    shared = next(
        theirs[key]
        for key in ("model.shared.weight", "model.encoder.embed_tokens.weight", "lm_head.weight")
        if key in theirs
    )[rows]
    out = {
        "src_embed.lut.weight": shared,
        "tgt_embed.lut.weight": shared,
        "generator.weight": shared,
    }
    for ours, name in name_pairs(n_enc, n_dec):
        out |= {f"{ours}.{k}": theirs[f"{name}.{k}"] for k in ("weight", "bias")}
    for ours, names in fused(n_enc, n_dec):
        out |= {
            f"{ours}.{k}": torch.cat([theirs[f"{n}.{k}"] for n in names])
            for k in ("weight", "bias")
        }
    return out


def read_folder(
    folder: Path, raw: dict[str, Any], weights: dict[str, Tensor]
) -> tuple[Transformer, M2M100Tokenizer | NllbTokenizer]:
    """The folder's network as our Transformer (eval mode) and its tokenizer, M2M-100's or
    NLLB's; writes nothing.

    Raises:
        ValueError: settings the Transformer here lacks, or files that do not fit, each named.
    """
    config = M2M100Config.from_dict(raw)
    problems = architecture_problems(config)
    if problems:
        raise ValueError(
            f"{folder}: the Transformer here cannot hold this model exactly: {'; '.join(problems)}"
        )
    tokenizer = (nllb.read_tokenizer if nllb.is_nllb(folder) else read_tokenizer)(folder, config)
    start = tokenizer.folder_ids()[config.decoder_start_token_id]
    model = Transformer(tokenizer.vocab_size, PAD_ID, **our_settings(config, start))
    try:
        ours = our_state_dict(
            weights, config.encoder_layers, config.decoder_layers, tokenizer.folder_rows()
        )
        model.load_state_dict(ours)
    except (KeyError, StopIteration, RuntimeError) as e:
        raise ValueError(f"{folder}: its weights do not fit its config.json: {e!r}") from e
    return model.eval(), tokenizer


def m2m100_config(
    config: TransformerConfig, tokenizer: M2M100Tokenizer | NllbTokenizer
) -> M2M100Config:
    """The M2M100Config of the same network, with the folder's special-token ids."""
    ids = {piece: i for i, piece in enumerate(tokenizer.folder_vocab)}
    start = tokenizer.folder_rows()[config.decoder_start]
    return M2M100Config(
        vocab_size=len(tokenizer.folder_vocab),
        max_position_embeddings=config.max_positions,
        d_model=config.d_model,
        encoder_layers=config.N_enc,
        decoder_layers=config.N_dec,
        encoder_attention_heads=config.h,
        decoder_attention_heads=config.h,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff_dec,
        activation_function=config.activation,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        scale_embedding=True,
        tie_word_embeddings=True,
        pad_token_id=ids["<pad>"],
        bos_token_id=ids["<s>"],
        eos_token_id=ids["</s>"],
        decoder_start_token_id=start,
        architectures=["M2M100ForConditionalGeneration"],
    )


def export_m2m100(
    model: Transformer, tokenizer: M2M100Tokenizer | NllbTokenizer, out: Path
) -> Path:
    """Write `out/` as transformers' M2M100 folder: config, generation config, weights, tokenizer
    (M2M-100's, or NLLB's for a model imported from NLLB).

    Raises:
        ExportError: a Transformer M2M-100 cannot hold (`formats.m2m100_problems`), each
            setting named.
    """
    check_exportable(model.config, "hf")
    config = m2m100_config(model.config, tokenizer)
    theirs = M2M100ForConditionalGeneration(config)
    theirs.generation_config = GenerationConfig(
        decoder_start_token_id=config.decoder_start_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        max_length=model.config.max_positions + 1,  # the decoder start, then at most max_positions
        num_beams=4,
        length_penalty=1.0,
        early_stopping=True,
        suppress_tokens=[config.pad_token_id],  # never a target in training: ours skips it
    )
    ours = {key: t.detach().float().cpu() for key, t in model.state_dict().items()}
    rows = tokenizer.folder_ids()  # our id of each folder id
    weights = {"model.shared.weight": ours["src_embed.lut.weight"][rows]}
    for our_name, name in name_pairs(model.config.N_enc, model.config.N_dec):
        weights |= {f"{name}.{k}": ours[f"{our_name}.{k}"] for k in ("weight", "bias")}
    for our_name, names in fused(model.config.N_enc, model.config.N_dec):
        for k in ("weight", "bias"):
            parts = ours[f"{our_name}.{k}"].chunk(len(names))
            weights |= {f"{n}.{k}": t for n, t in zip(names, parts, strict=True)}
    missing, unexpected = theirs.load_state_dict(weights, strict=False)
    # Tied to model.shared; the sinusoids are recomputed, never loaded.
    tied = ("embed_tokens.weight", "lm_head.weight", "embed_positions.weights")
    missing = [key for key in missing if not key.endswith(tied)]
    if missing or unexpected:
        raise ExportError(f"weights left unmapped: missing {missing}, unexpected {unexpected}")
    theirs.eval().save_pretrained(out)
    if isinstance(tokenizer, NllbTokenizer):
        nllb.write_tokenizer(tokenizer, out)
    else:
        write_tokenizer(tokenizer, out)
    return out


def write_tokenizer(tokenizer: M2M100Tokenizer, out: Path) -> None:
    """Write what `transformers.M2M100Tokenizer` reads: the model, vocab.json, its config."""
    from transformers import M2M100Tokenizer as Theirs

    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "sentencepiece.bpe.model", tokenizer.model)
    pieces = tokenizer.folder_vocab[: tokenizer.vocab_json_size]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    write_atomically(out / "vocab.json", json.dumps(vocab, ensure_ascii=False, indent=2))
    files = (str(out / name) for name in ("vocab.json", "sentencepiece.bpe.model"))
    Theirs(*files, language_codes=tokenizer.language_codes).save_pretrained(out)


def usage() -> str:
    """The model card's section on loading the folder."""
    return """## Usage

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder", src_lang="de")
model = AutoModelForSeq2SeqLM.from_pretrained("path/to/this/folder")
batch = tokenizer(["Ein Satz zum Übersetzen."], return_tensors="pt", padding=True)
output = model.generate(
    **batch, forced_bos_token_id=tokenizer.get_lang_id("fr"), num_beams=4, max_new_tokens=128
)
print(tokenizer.batch_decode(output, skip_special_tokens=True))
```

The tokenizer frames a source as `__de__ tokens </s>`; the decoder starts with `</s>` and the
target language's token, which `forced_bos_token_id` names, as in training. `nmt-translate
--src-lang de --tgt-lang fr` translates the same. `generate`'s `length_penalty` divides by
|Y|^alpha, what `nmt-translate --penalty fairseq` does.
"""
