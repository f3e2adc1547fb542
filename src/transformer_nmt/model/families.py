"""Model families: the one map from a family's name to its config, its model and its checks.

A checkpoint's "model_config" names its family under "family"; one written before there were
families holds a Transformer. Training, checkpoints and the config checks look a family up here
instead of testing a model's type.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transformer_nmt.model import rnn, transformer
from transformer_nmt.model.interface import EncoderDecoder, ModelConfig
from transformer_nmt.model.rnn.config import settings_problems as rnn_problems
from transformer_nmt.model.transformer.config import settings_problems as transformer_problems


@dataclass(frozen=True)
class Family:
    """What it takes to build, rebuild and check one kind of model."""

    config: type  # its settings: from_dict, to_dict, and the `family` name
    model: type  # built from numbers by a Hydra `_target_`, or by `from_config(config)`
    settings_problems: Callable[[dict[str, Any]], list[str]]  # every inconsistent setting


FAMILIES = {
    family.config.family: family
    for family in (
        Family(transformer.TransformerConfig, transformer.Transformer, transformer_problems),
        Family(rnn.RNNConfig, rnn.RNNAttention, rnn_problems),
    )
}
DEFAULT_FAMILY = "transformer"  # what a model config without "family" holds


def family_named(name: str) -> Family:
    if name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}: known are {', '.join(FAMILIES)}")
    return FAMILIES[name]


def family_of_model(model_class: type) -> Family:
    """The family whose model class is `model_class`, e.g. a config's `_target_`."""
    for family in FAMILIES.values():
        if issubclass(model_class, family.model):
            return family
    known = ", ".join(f"{f.model.__qualname__} ({name})" for name, f in FAMILIES.items())
    raise ValueError(f"{model_class.__qualname__} is no model family's model: known are {known}")


def config_from_dict(values: dict[str, Any]) -> ModelConfig:
    """The config a checkpoint stored, of the family it names (the Transformer if none)."""
    return family_named(values.get("family", DEFAULT_FAMILY)).config.from_dict(values)


def model_from_config(model_config: ModelConfig) -> EncoderDecoder:
    """A new model, freshly initialised, built as `model_config` says."""
    return family_named(model_config.family).model.from_config(model_config)
