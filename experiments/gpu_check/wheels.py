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
CHECK = "PYTHONUNBUFFERED=1 timeout {inner} python3 -m experiments.gpu_check.check --out $OUT"
# Device seconds: a session has 900, the machine's start takes some of them. (the call's limit,
# the check's): the full call starts no row after 330 s (check.py's default), a rerun of the rows
# it missed none after 150; the check's limit leaves the last row time to finish.
FULL_CALL_S, RERUN_S = (480, 420), (240, 200)


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


def command(rows: list[int] | None = None) -> str:
    """The device tool's `run` arguments: the command line and what to carry.

    `rows`: a rerun's sections, run at once on the still-warm machine.
    """
    limit, inner = RERUN_S if rows else FULL_CALL_S
    check = CHECK.format(inner=inner)
    if rows:
        check += f" --rows {' '.join(map(str, rows))} --seconds 150"
    return f'command: "{INSTALL}; {check}"\ncarry: [".whl"]\ntimeout_s: {limit}'


if __name__ == "__main__":
    download()
    size = sum(f.stat().st_size for f in FOLDER.glob("*.whl")) / 2**20
    print(f"\n{len(list(FOLDER.glob('*.whl')))} wheels, {size:.0f} MiB, in {FOLDER}")
    print(f"\nThe device call (the kind `status` names):\n{command()}")
    print(f"\nA rerun of sections that did not finish, e.g. 3 and 4:\n{command([3, 4])}")
