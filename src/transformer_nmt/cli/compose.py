"""Config groups composed as training composes them, and a split of any `conf/data` config."""

import os
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from hydra.utils import instantiate
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

import transformer_nmt
from transformer_nmt.data.corpus import DataError


def project_root() -> Path:
    """The checkout holding `conf/`: PROJECT_ROOT, else the editable install's root."""
    # src/transformer_nmt/__init__.py -> the repo root, when installed with `pip install -e .`.
    root = Path(os.environ.get("PROJECT_ROOT") or Path(transformer_nmt.__file__).parents[2])
    if not (root / "conf" / "train.yaml").is_file():
        raise DataError(
            f"no conf/train.yaml under {root}: --data needs the repo's configs; install the "
            "package editable (pip install -e .) or set PROJECT_ROOT to the checkout"
        )
    return root


def compose_group(group: str, option: str, overrides: list[str] = ()) -> DictConfig:
    """The `group` node of `conf/train.yaml` composed with `<group>=<option>` and `overrides`.

    As training composes it: the option's defaults (e.g. model=narrow on small on base) included.
    """
    root = project_root()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(root / "conf"), version_base="1.3"):
        cfg = compose(
            "train", overrides=[f"paths.root_dir={root}", f"{group}={option}", *overrides]
        )
    GlobalHydra.instance().clear()
    return cfg[group]


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
