"""A pipeline stage's folder, keyed by the hash of its inputs: a rerun does only what changed.

A stage's folder is `<work>/<name>-<key>`, the key a hash of everything its output depends on
(its config, the contents of its input files, the parent checkpoint). `stage.json`, written
atomically last, marks it done: a folder without it is an interrupted stage, which its next run
resumes (training from the folder's last.ckpt; a translation after its last finished part).
"""

import hashlib
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformer_nmt.runtime.atomic import write_atomically

log = logging.getLogger(__name__)

DONE = "stage.json"
KEY_CHARS = 16  # of the sha256: a collision among one work folder's stages is not a concern


def file_digest(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def stage_key(settings: Any, files: Iterable[str | os.PathLike] = ()) -> str:
    """The hash of JSON-able settings and of the contents of the input files."""
    inputs = {"settings": settings, "files": [file_digest(f) for f in files]}
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_CHARS]


class Stage:
    """One stage's folder: where it writes, and whether it is done."""

    def __init__(self, work: str | os.PathLike, name: str, key: str):
        self.name = name
        self.folder = Path(work) / f"{name}-{key}"

    @property
    def done(self) -> bool:
        return (self.folder / DONE).is_file()

    def start(self) -> bool:
        """Whether the stage must run; logs what is reused or resumed."""
        if self.done:
            log.info("Stage %s: done, reused from %s", self.name, self.folder)
            return False
        resumed = self.folder.is_dir()
        log.info("Stage %s: %s in %s", self.name, "resumed" if resumed else "runs", self.folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        return True

    def record(self) -> dict[str, Any]:
        """What the done stage said it made."""
        return json.loads((self.folder / DONE).read_text())

    def finish(self, record: dict[str, Any]) -> None:
        """Mark the stage done; `record` says what it made."""
        write_atomically(self.folder / DONE, json.dumps(record, indent=2, default=str) + "\n")
