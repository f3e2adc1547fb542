"""The rules that span config groups: the model's family against the checkpoint resumed from, the
callbacks a resumed run needs, the data's lengths against the model's positions, the tokenizer.

Each component checks its own settings beside the code that uses them; `run_plan.check_config`
collects them all with these.
"""

import logging
from typing import Any

from hydra.utils import get_class
from lightning.pytorch.callbacks import WeightAveraging
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.data.padding import longest_padded
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.model.families import DEFAULT_FAMILY, Family, family_of_model
from transformer_nmt.training.callbacks import configured
from transformer_nmt.training.plan.resume import ResumePoint

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """Settings that cannot train together."""


def model_settings(cfg: DictConfig) -> dict[str, Any]:
    """The `model` config as the plain settings a model is built from (no `_target_`)."""
    settings = OmegaConf.to_container(cfg.model, resolve=True)
    settings.pop("_target_", None)
    return settings


def model_family(cfg: DictConfig) -> Family:
    """The family of the model that `model._target_` builds; ValueError if it is none's."""
    target = cfg.model._target_
    try:
        model_class = get_class(target)
    except Exception as e:  # Hydra re-raises whatever the import raised
        raise ValueError(f"model._target_={target} cannot be imported: {e}") from e
    try:
        return family_of_model(model_class)
    except ValueError as e:
        raise ValueError(f"model._target_={target}: {e}") from e


def model_problems(cfg: DictConfig) -> list[str]:
    """Inconsistent model settings, by the rules of the model's own family."""
    try:
        family = model_family(cfg)
    except ValueError as e:
        return [str(e)]
    return family.settings_problems(model_settings(cfg))


def resume_problems(cfg: DictConfig, resume: ResumePoint) -> list[str]:
    """A `ckpt_path` that is no file, or whose training the config does not continue."""
    if not resume.resuming:
        return []
    if problem := resume.path_problem():
        return [problem]
    return [*_resumed_average_problems(cfg, resume), *_resumed_model_problems(cfg, resume)]


def _resumed_average_problems(cfg: DictConfig, resume: ResumePoint) -> list[str]:
    """A run trained with `callbacks=ema` keeps its trained weights beside the average (its
    `state_dict`), which only the callback puts back: without it, training would go on from
    the average."""
    if resume.averages_weights and not _averages_weights(cfg):
        return [
            f"ckpt_path={resume.path} was trained with callbacks=ema: its weights are the moving "
            "average, and the trained ones come back only through that callback; resume with "
            "callbacks=ema (and the run's callbacks.ema settings)"
        ]
    return []


def _averages_weights(cfg: DictConfig) -> bool:
    """Whether a configured callback is a Lightning `WeightAveraging` (`callbacks=ema`'s is,
    under whatever key): those write, and read back, `current_model_state`."""
    return any(configured(cfg, WeightAveraging))


def _resumed_model_problems(cfg: DictConfig, resume: ResumePoint) -> list[str]:
    """Model settings of the config that differ from those the checkpoint was trained with."""
    if model_problems(cfg):
        return []  # reported on their own
    family, settings = model_family(cfg), model_settings(cfg)
    path, saved = resume.path, resume.model_config
    if saved is None:
        return []
    saved_family = saved.get("family", DEFAULT_FAMILY)
    if saved_family != family.config.family:
        return [
            f"ckpt_path={path} holds a {saved_family} model; your config builds a "
            f"{family.config.family} model (model._target_={cfg.model._target_}): resume with "
            "the run's own model settings (e.g. the same experiment=... and model=...)"
        ]
    if (cfg.get("init") or {}).get("from") is not None:
        return []  # a fine-tuning run's model is its parent's, whatever cfg.model sizes
    vocabulary = {key: saved[key] for key in ("vocab_size", "pad_id")}
    ours = family.config(**vocabulary, **settings).to_dict()
    # As the checkpoint loads: a setting it predates takes its default, a derived one (a
    # stack's own depth, before there was one) its value from what the checkpoint holds.
    trained = family.config.from_dict(saved).to_dict()
    differ = [key for key in ours if ours[key] != trained[key]]
    if not differ:
        return []
    was = ", ".join(f"model.{key}={trained[key]}" for key in differ)
    given = ", ".join(f"model.{key}={ours[key]}" for key in differ)
    return [
        f"ckpt_path={path} was trained with {was}; your config says {given}: resume with "
        "the run's own model settings (e.g. the same experiment=... and model=...)"
    ]


def warn_about_positions(cfg: DictConfig) -> None:
    """A kept pair longer than the position table would stop training when it is drawn.

    Only a warning: corpora of short sentences (the toy task) train fine with a small table.
    """
    data, max_positions = cfg.data, cfg.model.get("max_positions", 1024)
    setting = data.get("pad_to_multiple_of", 1)
    positions = longest_padded(data.max_len, setting)
    if max_positions < positions:
        log.warning(
            "data.max_len=%d allows batches of %d positions (max_len + 1 padded as "
            "data.pad_to_multiple_of=%s pads in 16 bits), more than model.max_positions=%d: a "
            "sentence that long would stop training; raise model.max_positions or lower "
            "data.max_len",
            data.max_len,
            positions,
            setting,
            max_positions,
        )


def check_resume(resume: ResumePoint, tokenizer: BPETokenizer) -> None:
    """Refuse to resume from a checkpoint of another tokenizer than the data's, which would
    silently give every id another meaning."""
    saved = resume.tokenizer
    if saved is not None and saved != tokenizer.to_str():
        raise ConfigError(
            f"ckpt_path={resume.path} was trained with another tokenizer than the one the data "
            "settings give (data.corpus, data.src_lang, data.tgt_lang, data.vocab_size, "
            "data.min_frequency): resume with the run's own data settings"
        )
