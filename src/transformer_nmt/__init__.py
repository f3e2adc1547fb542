"""The Transformer of "Attention Is All You Need" for machine translation, trained with Lightning
and Hydra; `from transformer_nmt import Translator` is the front door for translating."""

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
