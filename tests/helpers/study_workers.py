"""Sweep workers as a user starts them, `python train.py -m` on the toy search, on this host or
as another host (own hostname and PID namespace), and what tests ask of the study they share."""

import re
import subprocess
from pathlib import Path

import pytest

from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT
from helpers.sweep_runs import TOY_SPACE, train_command

STUDY = "multi30k_de_en"
# The toy search over the learning rate alone, each trial valued by its last val/loss: a
# number that differs from trial to trial, unlike a few steps' BLEU of 0.
SEARCH = [
    f"hparams_search={STUDY}",
    *TOY_SPACE,
    "optimized_metric=val/loss",
    "optimized_direction=minimize",
]
TIMEOUT = 900
# Another host: its own hostname, PID namespace and /proc; killed with it, its worker dies too.
AS_HOST = ["unshare", "--uts", "--pid", "--mount-proc", "--fork", "--kill-child"]


def start_worker(
    tmp_path: Path, name: str, overrides: list[str], host: str | None = None
) -> subprocess.Popen:
    """A `python train.py -m` worker on the toy search, its output in tmp_path/<name>.out.

    With `host`, it runs as that host: its own hostname and PID namespace (as root only).
    """
    command = train_command(tmp_path, [*SEARCH, *overrides])
    if host is not None:
        command = [*AS_HOST, "sh", "-c", 'hostname "$0" && exec "$@"', host, *command]
    with (tmp_path / f"{name}.out").open("w") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=ddp_env(), stdout=out, stderr=subprocess.STDOUT
        )


def can_run_as_another_host() -> str | None:
    """Why workers cannot run as other hosts here; None if they can."""
    try:
        probe = subprocess.run([*AS_HOST, "hostname", "probe"], capture_output=True, text=True)
    except FileNotFoundError:
        return "no unshare (util-linux)"
    return None if probe.returncode == 0 else f"unshare refused: {probe.stderr.strip()}"


def finish(tmp_path: Path, name: str, worker: subprocess.Popen) -> None:
    assert worker.wait(timeout=TIMEOUT) == 0, output(tmp_path, name)[-3000:]


def output(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.out").read_text()


def on(storage: str, n_trials: int) -> list[str]:
    return [f"hydra.sweeper.storage='{storage}'", f"hydra.sweeper.n_trials={n_trials}"]


def database_name(request: pytest.FixtureRequest) -> str:
    """A database name for this test, from its name."""
    return re.sub(r"\W", "_", request.node.name).lower()[:60]
