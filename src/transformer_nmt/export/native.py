"""Our own model as a folder without pickle: model.safetensors, config.json, tokenizer.json.

A .ckpt loads weights-only here, yet other tools can only trust it by running torch's unpickler;
safetensors is plain tensors behind a JSON header, the format model hubs prefer. Tied matrices are
stored once and tied again on loading. Every model family is stored as it is: its config names it.
"""

import copy
import json
import os
from pathlib import Path

import safetensors.torch
import torch

from transformer_nmt.data.tokenizer import PAD_ID, SubwordTokenizer
from transformer_nmt.data.tokenizer_kinds import tokenizer_from_str
from transformer_nmt.export import ExportError
from transformer_nmt.model import EncoderDecoder, config_from_dict, model_from_config
from transformer_nmt.runtime.atomic import write_atomically

FORMAT = "transformer-nmt"  # config.json's format, and the model card's library_name
FORMAT_VERSION = 1


def save_safetensors(
    model: EncoderDecoder, tokenizer: SubwordTokenizer, out: str | os.PathLike
) -> Path:
    """Write `out/`: model.safetensors, config.json (the model config) and tokenizer.json."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if not all(p.is_contiguous() for p in model.parameters()):
        # safetensors stores (and finds ties among) contiguous tensors only; a CPU Translator's
        # linear weights are laid out transposed (`transpose_linear_weights`). A copy keeps ties.
        model = copy.deepcopy(model)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.set_(parameter.contiguous())
    safetensors.torch.save_model(model, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {"format": FORMAT, "format_version": FORMAT_VERSION, "model": model.config.to_dict()}
    write_atomically(out / "config.json", json.dumps(config, indent=2) + "\n")
    write_atomically(out / "tokenizer.json", tokenizer.to_str())
    return out


def load_safetensors(folder: str | os.PathLike) -> tuple[EncoderDecoder, SubwordTokenizer]:
    """The model, in eval mode, and the tokenizer of a `save_safetensors` folder."""
    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if config.get("format") != FORMAT:
            raise ExportError(
                f"{folder / 'config.json'} is not a transformer-nmt config (format "
                f"{config.get('format')!r}); a Hugging Face export loads with transformers"
            )
        model = model_from_config(config_from_dict(config["model"]))
        tokenizer = tokenizer_from_str((folder / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise ExportError(f"{folder}: not a readable transformer-nmt folder: {e}") from e
    if model.config.vocab_size != tokenizer.vocab_size or model.config.pad_id != PAD_ID:
        raise ExportError(f"{folder}: tokenizer.json does not belong to these weights")
    try:
        safetensors.torch.load_model(model, str(folder / "model.safetensors"))
    except (OSError, RuntimeError) as e:  # strict: a missing or unexpected tensor is an error
        raise ExportError(f"{folder}: its weights do not fit its config: {e}") from e
    return model.eval(), tokenizer


def usage() -> str:
    """The model card's section on loading the folder."""
    return """## Usage

```python
from transformer_nmt import Translator

translator = Translator.from_folder("path/to/this/folder")
print(translator.translate(["A sentence to translate."]))
```

`model.safetensors` holds the weights under the names of transformer-nmt's `Transformer`, tied
matrices once; `config.json` its `TransformerConfig`; `tokenizer.json` its tokenizer (the joint
BPE, or an imported model's SentencePiece models and vocabulary).
"""
