"""Where the Hydra configs are: the checkout's top-level `conf/`, or the copy inside a wheel.

`conf/` stays at the top of the repository, where users edit it; the wheel build copies it into
the package as `transformer_nmt/conf/` (setup.py), so that an installed `nmt-train` finds it.
"""

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # transformer_nmt/, above runtime/
# src/transformer_nmt -> the repository, when the code runs from a checkout (editable or not).
CHECKOUT = PACKAGE.parents[1]
PACKAGED = PACKAGE / "conf"
ENTRY_CONFIG = "train.yaml"


class ConfigsMissing(FileNotFoundError):
    """Neither a checkout's `conf/` nor a wheel's copy of it holds the training config."""


def checkout_root() -> Path | None:
    """The repository this code runs from, if it runs from one (not from an installed wheel)."""
    in_src = PACKAGE.parent.name == "src"
    return CHECKOUT if in_src and (CHECKOUT / "conf" / ENTRY_CONFIG).is_file() else None


def config_dir(root: Path | None = None) -> Path:
    """`root/conf`, else the checkout's `conf/`, else the configs the installed wheel holds."""
    root = root or checkout_root()
    folder = root / "conf" if root is not None else PACKAGED
    if not (folder / ENTRY_CONFIG).is_file():
        raise ConfigsMissing(
            f"no {ENTRY_CONFIG} in {folder}: run from a checkout of the repository, or install "
            "a wheel built from one (`pip install .`), which carries conf/ inside the package"
        )
    return folder


def project_root() -> Path:
    """Where `paths.root_dir` points (data/, cache/, outputs/): PROJECT_ROOT, else the checkout,
    else the working directory."""
    if os.environ.get("PROJECT_ROOT"):
        return Path(os.environ["PROJECT_ROOT"])
    return checkout_root() or Path.cwd()
