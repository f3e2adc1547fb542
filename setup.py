"""The wheel carries the repository's top-level `conf/` as `transformer_nmt/conf/`.

Everything else is declared in pyproject.toml. `conf/` stays at the top, where users edit it;
an editable install reads it there (runtime/configs.py), so only a real build copies it.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for path in sorted(Path("conf").rglob("*.yaml")):
            target = Path(self.build_lib, "transformer_nmt", path)
            self.mkpath(str(target.parent))
            self.copy_file(str(path), str(target))


setup(cmdclass={"build_py": BuildWithConfigs})
