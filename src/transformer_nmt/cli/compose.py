"""Config groups composed as training composes them, and a split of any `conf/data` config."""

from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from hydra.utils import instantiate
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from transformer_nmt.data.corpus import DataError
from transformer_nmt.runtime.configs import config_dir, project_root


def compose_group(group: str, option: str, overrides: list[str] = ()) -> DictConfig:
    """The `group` node of `conf/train.yaml` composed with `<group>=<option>` and `overrides`.

    As training composes it: the option's defaults (e.g. model=narrow on small on base) included.
    """
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[f"paths.root_dir={project_root()}", f"{group}={option}", *overrides],
        )
    GlobalHydra.instance().clear()
    return cfg[group]


def multilingual_corpus(data: str, overrides: list[str] = ()) -> tuple[Any, list[str]] | None:
    """A multilingual data config's corpus (any two of its languages read as a direction) and
    its languages; None for a config of one direction. A config that does not compose is a
    DataError naming it."""
    try:
        cfg = compose_group("data", data, overrides)
        if not cfg.get("languages"):
            return None
        return instantiate(cfg.corpus), [str(lang) for lang in cfg.languages]
    except (HydraException, OmegaConfBaseException) as e:
        raise DataError(f"data config {data!r} with overrides {list(overrides)}: {e}") from e


def read_split(
    data: str, split: str, overrides: list[str] = ()
) -> tuple[list[tuple[str, str]], str, str]:
    """Compose `conf/train.yaml` with `data=<data>` and `overrides`, and read `split`.

    Returns the cleaned (source, target) pairs and the source and target languages. Only
    `cfg.data.corpus` is built, so no tokenizer is trained and no store is encoded. A config
    or override that does not compose is a DataError naming both.
    """
    try:
        cfg = compose_group("data", data, overrides)
        corpus = instantiate(cfg.corpus)
    except (HydraException, OmegaConfBaseException) as e:
        raise DataError(f"data config {data!r} with overrides {list(overrides)}: {e}") from e
    return corpus.read(split, cfg.src_lang, cfg.tgt_lang), cfg.src_lang, cfg.tgt_lang
