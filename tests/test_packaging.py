"""The package as a user installs it: a wheel that trains and translates outside the checkout,
and the metadata (license, citation, Python) that pip and GitHub read."""

import os
import shutil
import subprocess
import sys
import tomllib
import venv
from importlib.metadata import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from transformer_nmt.runtime import configs

ROOT = Path(__file__).resolve().parents[1]
# What the build reads; copied, so that building leaves no build/ or egg-info in the checkout.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "LICENSE", "README.md", "conf", "src")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
RUNTIME_EXTRAS = [e for e in PYPROJECT["project"]["optional-dependencies"] if e != "dev"]


def run(command: list, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    pip_wheel = ["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    run([sys.executable, *pip_wheel, "-w", dist, source], cwd=source)
    (built,) = dist.glob("transformer_nmt-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, dict]:
    """A fresh venv holding the wheel and its runtime extras, and an environment using it alone.

    Its dependencies come from this environment's packages (no index is asked), so pip checks
    that the pins CI installs lie within the ranges the wheel declares.
    """
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, system_site_packages=True)
    python = env_dir / "bin" / "python"
    extras = ",".join(RUNTIME_EXTRAS)
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--no-index"]
    # Into the venv even where this environment has the project already (pip install -e .)...
    run([*pip, "--no-deps", "--force-reinstall", wheel], cwd=env_dir)
    # ...then its dependencies, resolved against this environment's packages.
    run([*pip, f"{wheel}[{extras}]"], cwd=env_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PROJECT_ROOT")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    env["WANDB_MODE"] = "disabled"
    return env_dir, env


@pytest.mark.slow
def test_the_installed_wheel_trains_and_translates_from_any_folder(installed, tmp_path):
    env_dir, env = installed
    where = run(
        ["python", "-c", "import transformer_nmt; print(transformer_nmt.__file__)"],
        cwd=tmp_path,
        env=env,
    )
    assert Path(where.stdout.strip()).is_relative_to(env_dir)  # not the checkout's copy
    train = ["nmt-train", "data=toy", "model=tiny", "trainer.max_steps=2", "logger=none"]
    run(train, cwd=tmp_path, env=env)
    (checkpoint,) = tmp_path.glob("outputs/train/runs/*/checkpoints/last.ckpt")
    translated = subprocess.run(
        ["nmt-translate", str(checkpoint), "--beam-size", "2", "--max-len-b", "3"],
        input="one two three\nfour\n",
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert translated.returncode == 0, translated.stderr[-3000:]
    assert len(translated.stdout.splitlines()) == 2


@pytest.mark.slow
def test_the_installed_nmt_train_names_an_unknown_config_group_option(installed, tmp_path):
    _, env = installed
    out = subprocess.run(
        ["nmt-train", "model=huge"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 1
    assert "Could not find 'model/huge'" in out.stderr and "hint: `--help`" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "outputs").exists()


def runtime_requirements() -> list[Requirement]:
    """What the package declares for itself and its runtime extras (dev: the tools CI adds)."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    declared = PYPROJECT["project"]["dependencies"] + sum(
        (extras[name] for name in RUNTIME_EXTRAS), []
    )
    return [Requirement(text) for text in declared]


def test_requires_python_is_the_oldest_python_every_pinned_dependency_supports():
    ours = SpecifierSet(PYPROJECT["project"]["requires-python"])
    lowest = next(minor for minor in range(20) if f"3.{minor}" in ours)
    theirs = {
        r.name: SpecifierSet(metadata(r.name)["Requires-Python"] or "")
        for r in runtime_requirements()
    }
    assert all(f"3.{lowest}" in spec for spec in theirs.values()), theirs
    assert any(f"3.{lowest - 1}" not in spec for spec in theirs.values()), theirs


def older_python() -> str | None:
    """A Python older than requires-python allows, if this machine has one."""
    found = shutil.which("python3.10") or ""
    pyenv = sorted(Path(sys.base_prefix).parent.glob("3.10*/bin/python3.10"))
    for candidate in [found, *map(str, pyenv)]:
        if candidate and subprocess.run([candidate, "-m", "pip", "--version"]).returncode == 0:
            return candidate
    return None


@pytest.mark.slow
def test_pip_on_an_older_python_refuses_the_wheel_with_its_own_message(wheel, tmp_path):
    python = older_python()
    if python is None:
        pytest.skip("no Python 3.10 with pip on this machine")
    out = subprocess.run(
        [python, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", "--target"]
        + [str(tmp_path), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1
    assert "transformer-nmt' requires a different Python: 3.10" in out.stderr
    assert "not in '>=3.11'" in out.stderr


def test_the_license_is_named_by_pyproject_and_the_citation():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and "MIT License" in (ROOT / "LICENSE").read_text()
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert (citation["license"], citation["version"]) == ("MIT", project["version"])
    (paper,) = citation["references"]
    assert paper["title"] == "Attention Is All You Need" and paper["year"] == 2017


def test_a_checkout_composes_its_own_conf_folder():
    assert configs.config_dir() == ROOT / "conf"
    assert configs.checkout_root() == ROOT


def test_without_any_configs_the_error_says_where_they_come_from(tmp_path, monkeypatch):
    monkeypatch.setattr(configs, "CHECKOUT", tmp_path)  # a checkout without conf/
    monkeypatch.setattr(configs, "PACKAGED", tmp_path / "conf")  # a wheel built without it
    with pytest.raises(configs.ConfigsMissing, match="carries conf/ inside the package"):
        configs.config_dir()
