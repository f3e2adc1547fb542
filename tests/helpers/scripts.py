"""Import a script of experiments/ as a module, so tests can call its functions."""

import importlib.util
from types import ModuleType

from helpers.hydra_compose import ROOT


def load_script(relative_path: str, name: str) -> ModuleType:
    """The module of the script at `relative_path` under the repository root."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
