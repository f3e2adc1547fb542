"""Fetch the wheels the GPU image lacks into .whl/ (git-ignored) and print the device command.

The device image has Python 3.12 with torch, lightning, torchmetrics, sacrebleu, tokenizers and
transformers, and no network. What the check needs beyond that travels as wheels, carried with
the call: Hydra and OmegaConf (train.py), sacremoses (nmt-evaluate's BLEU-tok), x-transformers
and its needs (a peer), CTranslate2 (a decoding peer). wandb stays behind: the check logs to
CSV, and train.py imports wandb only for logger=wandb.

    python -m experiments.gpu_check.wheels        # here, with PyPI in reach; then run the line
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / ".whl"
# Pinned in requirements.txt, the versions CI tests: read from there.
PINNED = ("hydra-core", "omegaconf", "sacremoses", "ctranslate2")
# The peers' packages, not dependencies of the project: the versions this check was written for.
PEERS = (
    "x-transformers==2.31.10",
    "einx==0.4.3",
    "frozendict==2.5.1",
    "loguru==0.7.3",
    "torch-einops-utils==0.2.0",
)
# On PyPI as a source archive only; pure Python, so the wheel built here runs there.
BUILT = ("antlr4-python3-runtime==4.9.3",)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux2014_x86_64")
INSTALL = (
    "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
    "--target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src:$PWD || exit"
)
CHECK = "PYTHONUNBUFFERED=1 timeout 470 python3 -m experiments.gpu_check.check --out $OUT"


def pinned(names: tuple[str, ...]) -> list[str]:
    """`name==version` of each name as requirements.txt pins it."""
    text = (ROOT / "requirements.txt").read_text()
    found = []
    for name in names:
        match = re.search(rf"^{re.escape(name)}==(\S+)$", text, re.MULTILINE)
        if match is None:
            raise SystemExit(f"requirements.txt pins no {name}: add it, or drop it from PINNED")
        found.append(f"{name}=={match[1]}")
    return found


def download() -> None:
    FOLDER.mkdir(exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    target = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"]
    target += [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    wanted = [*pinned(PINNED), *PEERS]
    subprocess.run([*pip, "download", "--no-deps", *target, "-d", FOLDER, *wanted], check=True)
    subprocess.run([*pip, "wheel", "--no-deps", "-w", FOLDER, *BUILT], check=True)


def command() -> str:
    """The device tool's `run` arguments: the command line and what to carry."""
    return f'command: "{INSTALL}; {CHECK}"\ncarry: [".whl"]\ntimeout_s: 540'


if __name__ == "__main__":
    download()
    size = sum(f.stat().st_size for f in FOLDER.glob("*.whl")) / 2**20
    print(f"\n{len(list(FOLDER.glob('*.whl')))} wheels, {size:.0f} MiB, in {FOLDER}")
    print(f"\nThe device call (kind nvidia-h100-x1):\n{command()}")
