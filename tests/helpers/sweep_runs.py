"""`python train.py -m` searches as a user runs them, on the toy task with a few steps a trial,
and what tests need to follow their workers: files to wait for, a worker that is gone."""

import glob
import socket
import subprocess
import sys
from pathlib import Path

from helpers.polling import poll
from transformer_nmt.runtime.processes import this_process

# The toy task, a few steps a trial: a sweep's mechanics, not its results.
FAST_TOY = [
    "experiment=toy",
    "logger=none",
    "~callbacks.attention_maps",
    "~callbacks.translation_table",
    "callbacks.checkpoints.every_minutes=null",
    "trainer.max_epochs=1",
    "+trainer.limit_train_batches=3",
    "data.corpus.num_val=8",
]

# The search's parameters fixed to a tiny model on the toy vocabulary, so that trials are quick;
# the learning rate still searched.
TOY_SPACE = [
    "data.vocab_size=512",
    "data.max_tokens=1024",
    "module.warmup_steps=50",
    "module.label_smoothing=0.1",
    "model.dropout=0.1",
    "model.attention_dropout=0.0",
    "model.activation_dropout=0.0",
    "model.N=1",
    "model.d_model=64",
    "model.d_ff=128",
    "model.h=4",
    "model.tie_embeddings=all",
]


def train_command(log_dir: Path, overrides: list[str]) -> list[str]:
    """`python train.py -m` on the fast toy task, every output and cache under log_dir."""
    return [
        sys.executable,
        "train.py",
        "-m",
        *FAST_TOY,
        f"paths.log_dir={log_dir}",
        f"paths.cache_dir={log_dir}/cache",
        *overrides,
    ]


def wait_for(pattern: str | Path, count: int = 1, timeout: float = 600) -> list[str]:
    """The paths matching `pattern` once there are `count` of them; TimeoutError past timeout.

    For events another process signals by writing a file: no guess at how long it takes.
    """

    def enough() -> list[str] | None:
        found = sorted(glob.glob(str(pattern)))
        return found if len(found) >= count else None

    missing = lambda: f"{len(glob.glob(str(pattern)))} of {count} files {pattern}"  # noqa: E731
    return poll(enough, timeout, missing)


def dead_worker() -> dict[str, object]:
    """The `worker` attribute of a trial whose worker ran in this namespace and has ended."""
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {"host": socket.gethostname(), **this_process(), "pid": int(ended.stdout), "start": "0"}
