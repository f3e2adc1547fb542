"""Exports of a trained model for other runtimes: Hugging Face `transformers` (`hf`), CTranslate2
(`ct2`), and the model card each folder gets (`card`). The exporters import their runtime, so
import them by module, when needed."""


class ExportError(ValueError):
    """A model that the target format cannot express exactly, or a folder it must not write."""
