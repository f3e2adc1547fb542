"""What each export format can carry: the one table `nmt-export` and the exporters check first.

A model the format cannot hold exactly is refused before any file is written, with an
ExportError naming the family or switch and the formats that do take it. Our own safetensors
folder takes every family.
"""

from collections.abc import Callable

from transformer_nmt.export import ExportError
from transformer_nmt.model import ModelConfig, TransformerConfig

# Problems by the switch (or family) that causes them: formats are compared switch by switch.
Problems = dict[str, str]

NAMES = {
    "hf": "Hugging Face transformers (MarianMT, M2M-100)",
    "ct2": "CTranslate2",
    "safetensors": "safetensors",
}


def _family(config: ModelConfig, name: str) -> Problems:
    if isinstance(config, TransformerConfig):
        return {}
    family = f"the {config.family} family (model={config.family})"
    return {"family": f"{family}: {name} holds a Transformer only"}


def marian_problems(config: ModelConfig) -> Problems:
    """Why MarianMT cannot hold this model exactly; empty if it can."""
    problems = _family(config, "MarianMT")
    if problems:
        return problems
    if config.rezero:
        problems["model.rezero"] = (
            "model.rezero=true (ReZero): MarianMT's residual connections each have a LayerNorm"
        )
    if config.norm_first:
        problems["model.norm_first"] = (
            "model.norm_first=true (pre-norm): MarianMT is post-norm only"
        )
    if config.positions != "sinusoidal":
        problems["model.positions"] = (
            f"model.positions={config.positions}: MarianMT has sinusoidal positions only"
        )
    if config.decoder_start is not None:
        problems["model.decoder_start"] = (
            f"model.decoder_start={config.decoder_start}: MarianMT's decoder reads nothing "
            "before its first token"
        )
    return problems | _head_problems(config, "MarianMT")


def _head_problems(config: TransformerConfig, name: str) -> Problems:
    head = config.d_model // config.h
    if config.d_model % config.h or config.d_k != head or config.d_v != head:
        return {
            "model.d_k, model.d_v": (
                f"model.d_k={config.d_k}, model.d_v={config.d_v}: {name}'s heads are "
                f"d_model / h = {config.d_model / config.h:g} wide"
            )
        }
    return {}


# An M2M-100 folder holds exactly the Transformer with these settings.
M2M100_SETTINGS = {
    "norm_first": True,
    "positions": "fairseq",
    "tie_embeddings": "all",
    "output_bias": False,
    "rezero": False,
}


def m2m100_problems(config: ModelConfig) -> Problems:
    """Why an M2M-100 folder cannot hold this model exactly; empty if it can."""
    problems = _family(config, "M2M-100")
    if problems:
        return problems
    for key, value in M2M100_SETTINGS.items():
        if getattr(config, key) != value:
            problems[f"model.{key}"] = f"model.{key}={getattr(config, key)}: M2M-100's is {value}"
    if config.decoder_start is None:
        problems["model.decoder_start"] = (
            "model.decoder_start=null: M2M-100's decoder reads </s> before the language tag"
        )
    return problems | _head_problems(config, "M2M-100")


def hf_problems(config: ModelConfig) -> Problems:
    """Why neither transformers folder can hold this model exactly: M2M-100's for a model with
    fairseq's positions (one imported from M2M-100), MarianMT's for any other."""
    if isinstance(config, TransformerConfig) and config.positions == "fairseq":
        return m2m100_problems(config)
    return marian_problems(config)


def ct2_problems(config: ModelConfig) -> Problems:
    """Why CTranslate2's Transformer spec cannot hold this model exactly; empty if it can."""
    problems = _family(config, "CTranslate2's TransformerSpec")
    if problems:
        return problems
    if config.rezero:
        problems["model.rezero"] = (
            "model.rezero=true (ReZero): CTranslate2's layers each have a LayerNorm"
        )
    if config.d_k != config.d_v:
        problems["model.d_k, model.d_v"] = (
            f"model.d_k={config.d_k} differs from model.d_v={config.d_v}: CTranslate2's heads "
            "have one size"
        )
    if config.positions == "fairseq":
        problems["model.positions"] = (
            "model.positions=fairseq: CTranslate2 here is given the paper's sinusoids or learned "
            "positions"
        )
    if config.decoder_start is not None:
        problems["model.decoder_start"] = (
            f"model.decoder_start={config.decoder_start}: CTranslate2's decoder here starts "
            "with one token"
        )
    return problems


def safetensors_problems(config: ModelConfig) -> Problems:
    """None: the folder stores any family's weights and config as they are."""
    return {}


PROBLEMS: dict[str, Callable[[ModelConfig], Problems]] = {
    "hf": hf_problems,
    "ct2": ct2_problems,
    "safetensors": safetensors_problems,
}


def check_exportable(config: ModelConfig, export_format: str) -> None:
    """Raise an ExportError if `export_format` cannot hold the model `config` describes.

    The error names each switch or family in the way, and the formats that take it.
    """
    problems = PROBLEMS[export_format](config)
    if not problems:
        return
    reasons = []
    for switch, reason in problems.items():
        takers = [name for name, check in PROBLEMS.items() if switch not in check(config)]
        reasons.append(f"{reason} (exported by: {', '.join(takers)})")
    raise ExportError(
        f"{NAMES[export_format]} cannot hold this model exactly: {'; '.join(reasons)}"
    )
