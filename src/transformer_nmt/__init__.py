"""transformer-nmt: the Transformer of "Attention Is All You Need" for machine translation.

model/     the network and search, plain PyTorch
data/      corpora, tokenizer, framing, batching, the DataModule
training/  the LightningModule and everything around a training run
cli/       the nmt-* commands
export/    Hugging Face, CTranslate2 and safetensors exports, each with its model card
train.py   `train(cfg)`, what `python train.py` runs
translator.py  `Translator`, the Python API: `from transformer_nmt import Translator`
checkpoint.py  reading, averaging and saving checkpoint files, without Lightning or Hydra
"""

from typing import Any

__all__ = ["Sampling", "Translator"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `import transformer_nmt.data` and the like need not load torch.
    if name == "Translator":
        from transformer_nmt.inference.translator import Translator

        return Translator
    if name == "Sampling":
        from transformer_nmt.decoding.sampling import Sampling

        return Sampling
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
