"""Checkpoint files: atomic saves, weights-only loading into a translator, averaging."""

import os
import pickle
import uuid
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer

PREFIX = "model."  # TranslationModule's attribute holding the Transformer
REQUIRED = ("state_dict", "model_config", "tokenizer")


class CheckpointError(ValueError):
    """A checkpoint that cannot, or must not, become a translator."""


def save_atomically(checkpoint: dict[str, Any], path: str | os.PathLike) -> None:
    """`torch.save` to a temporary file beside `path`, synced, then renamed over `path`.

    Readers, and a run resumed after a kill, see the previous file or the whole new one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):  # left by a process killed mid-save
        stale.unlink(missing_ok=True)
    # Same folder, so the same filesystem: os.replace is then atomic. Not mkstemp, whose 0600
    # mode would hide the checkpoint from those the umask lets read it.
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "xb") as f:
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    # The rename itself survives a crash of the machine only once the folder is synced.
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def read_checkpoint(path: str | os.PathLike, mmap: bool = False) -> dict[str, Any]:
    """Load tensors and plain data only (`weights_only`): a checkpoint never runs code here.

    `mmap` maps tensors instead of reading them, for a quick look at the other entries.
    """
    if not Path(path).is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as e:
        # Code can only run through a GLOBAL (a function or class by name); any other refusal
        # of the weights-only unpickler is a byte stream that is no pickle at all.
        if "GLOBAL" not in str(e):
            raise _corrupted(path, e) from e
        raise CheckpointError(
            f"{path}: refused, it holds objects other than tensors and plain data, and loading "
            f"them could run code; only weights are loaded ({e})"
        ) from e
    # torch raises RuntimeError, EOFError, KeyError or UnicodeDecodeError for damaged files.
    except Exception as e:
        raise _corrupted(path, e) from e
    if not isinstance(checkpoint, dict):
        raise CheckpointError(f"{path}: holds a {type(checkpoint).__name__}, not a checkpoint")
    return checkpoint


def _corrupted(path: str | os.PathLike, error: Exception) -> CheckpointError:
    return CheckpointError(
        f"{path}: unreadable, the file is truncated or corrupted ({type(error).__name__}: "
        f"{str(error)[:200]}); use an earlier checkpoint of the run, e.g. a step*.ckpt beside it"
    )


def load_checkpoint(path: str | os.PathLike) -> tuple[Transformer, BPETokenizer]:
    """The model, in eval mode, and the tokenizer saved in a training or averaged checkpoint."""
    return translator_from(read_checkpoint(path), where=str(path))


def translator_from(
    checkpoint: dict[str, Any], where: str = "checkpoint"
) -> tuple[Transformer, BPETokenizer]:
    """Rebuild (model, tokenizer) from a loaded checkpoint, refusing parts that do not match."""
    missing = [key for key in REQUIRED if key not in checkpoint]
    if missing:
        raise CheckpointError(
            f"{where}: not a transformer-nmt checkpoint, it lacks {missing}; checkpoints written "
            "by `train` and `nmt-average` carry the weights, the model config and the tokenizer"
        )
    try:
        tokenizer = BPETokenizer.from_str(checkpoint["tokenizer"])
    except Exception as e:
        raise CheckpointError(f"{where}: its tokenizer is unreadable or unusable: {e}") from e
    config = checkpoint["model_config"]
    if config["vocab_size"] != tokenizer.vocab_size or config["pad_id"] != PAD_ID:
        raise CheckpointError(
            f"{where}: the model was built for a vocabulary of {config['vocab_size']} with padding "
            f"id {config['pad_id']}, but its tokenizer has {tokenizer.vocab_size} tokens with "
            f"padding id {PAD_ID}: the tokenizer does not belong to these weights"
        )
    weights = model_weights(checkpoint)
    generator = weights.get("generator.weight")
    rows = 0 if generator is None else generator.size(0)
    if rows != tokenizer.vocab_size:
        raise CheckpointError(
            f"{where}: the weights' output layer has {rows} rows but the tokenizer has "
            f"{tokenizer.vocab_size} tokens: the vocabulary does not match the model"
        )
    model = Transformer(**config)
    try:
        model.load_state_dict(weights)
    except RuntimeError as e:
        raise CheckpointError(f"{where}: the weights do not fit its model config: {e}") from e
    return model.eval(), tokenizer


def model_weights(checkpoint: dict[str, Any]) -> dict[str, Tensor]:
    """The Transformer's state_dict inside a LightningModule checkpoint's."""
    state = checkpoint["state_dict"]
    return {key.removeprefix(PREFIX): t for key, t in state.items() if key.startswith(PREFIX)}


def average_checkpoints(paths: list[str | os.PathLike]) -> dict[str, Any]:
    """A checkpoint whose weights are the element-wise mean of those of `paths`.

    All must share model config and tokenizer. Tied embeddings appear under several keys;
    averaging each key alike keeps them equal. Only the weights, the model config and the
    tokenizer are kept: enough to translate or evaluate, not to resume training.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    total: dict[str, Tensor] = {}
    shared: dict[str, Any] = {}  # model config and tokenizer of the first
    dtypes: dict[str, torch.dtype] = {}
    for path in paths:
        checkpoint = read_checkpoint(path)
        translator_from(checkpoint, where=str(path))  # the same refusals as loading
        weights = model_weights(checkpoint)
        if not total:
            shared = {key: checkpoint[key] for key in ("model_config", "tokenizer")}
            dtypes = {key: t.dtype for key, t in weights.items()}
            # float64 sums: the mean of N identical checkpoints is exactly each of them.
            total = {key: t.double() for key, t in weights.items()}
            continue
        for key, value in shared.items():
            if checkpoint[key] != value:
                raise CheckpointError(
                    f"{path}: its {key} differs from that of {paths[0]}: only checkpoints of one "
                    "training run can be averaged"
                )
        for key, t in weights.items():
            total[key] += t
    return {
        "state_dict": {PREFIX + key: (t / len(paths)).to(dtypes[key]) for key, t in total.items()},
        **shared,
        "averaged_from": [str(p) for p in paths],
    }


def last_checkpoints(folder: str | os.PathLike, n: int) -> list[Path]:
    """The `n` checkpoints of `folder` with the highest training steps, oldest first.

    Files of the same step (`last.ckpt` is a copy of the latest) count once.
    """
    by_step: dict[int, Path] = {}
    for path in sorted(Path(folder).glob("*.ckpt")):
        checkpoint = read_checkpoint(path, mmap=True)  # the step, without reading the tensors
        by_step.setdefault(checkpoint.get("global_step", -1), path)
    if len(by_step) < n:
        raise CheckpointError(
            f"{folder} holds {len(by_step)} checkpoints of distinct training steps, fewer than "
            f"the {n} to average"
        )
    return [by_step[step] for step in sorted(by_step)[-n:]]


def resolve_checkpoints(paths: list[str], last: int | None = None) -> list[Path]:
    """Checkpoint files from command-line arguments: files as given, or one folder's last N."""
    if last is None:
        return [Path(p) for p in paths]
    if len(paths) != 1 or not Path(paths[0]).is_dir():
        raise CheckpointError(f"--average-last {last} needs exactly one checkpoint folder")
    return last_checkpoints(paths[0], last)


def load_translator(paths: list[Path]) -> tuple[Transformer, BPETokenizer]:
    """The model and tokenizer of one checkpoint, or of the average of several."""
    if len(paths) == 1:
        return load_checkpoint(paths[0])
    return translator_from(average_checkpoints(paths), where=f"average of {len(paths)}")
