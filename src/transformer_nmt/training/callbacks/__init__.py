"""Lightning callbacks, one module each, named for what it does.

No list here: the folder is the list, and a copy in a docstring falls behind the next callback."""

from collections.abc import Iterator

from hydra.utils import get_class
from omegaconf import DictConfig


def configured(cfg: DictConfig, kind: type) -> Iterator[tuple[str, DictConfig]]:
    """(key, config) of each configured callback that builds a `kind`, under whatever key."""
    for key, callback in (cfg.get("callbacks") or {}).items():
        try:
            builds = issubclass(get_class(callback._target_), kind)
        except Exception:  # no class: instantiating it fails later, naming it
            continue
        if builds:
            yield key, callback
