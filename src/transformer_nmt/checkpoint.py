"""Checkpoint files without the trainer: weights-only reading, rebuilding the model and tokenizer,
averaging the last K, atomic saving. Imports neither Lightning nor Hydra, so translating does not
load them; training reads and writes checkpoints through this module too."""

import os
import pickle
import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from transformer_nmt.data.languages import LANGUAGES_KEY, Languages
from transformer_nmt.data.tokenizer import PAD_ID, SubwordTokenizer
from transformer_nmt.data.tokenizer_kinds import tokenizer_from_str
from transformer_nmt.model import EncoderDecoder, config_from_dict, model_from_config
from transformer_nmt.runtime.atomic import (
    atomic_open,
    disk_full_error,
    is_disk_full,
    remove_stale_temporaries,
)

PREFIX = "model."  # TranslationModule's attribute holding the model
REQUIRED = ("state_dict", "model_config", "tokenizer")
# Which of a run's checkpoints a file is ("last", "best", PERIODIC): only periodic ones average.
KIND_KEY = "checkpoint_kind"
PERIODIC = "periodic"
# How periodic checkpoints were named before they were marked with their kind.
UNMARKED_PERIODIC = re.compile(r"step\d+\.ckpt")


def best_name(monitor: str, step: int, score: float) -> str:
    """The file name of a run's best checkpoint: `step<N>-<metric><score>.ckpt`, the metric
    `monitor` after its split (`val/bleu`: `step4285-bleu38.71.ckpt`; `val/bleu/de-fr`:
    `step4285-bleu-de-fr30.02.ckpt`)."""
    return f"step{step}-{_metric_in_name(monitor)}{score:.2f}.ckpt"


def _metric_in_name(monitor: str) -> str:
    return monitor.split("/", 1)[-1].replace("/", "-")


def best_checkpoints(folder: str | os.PathLike, monitor: str) -> list[Path]:
    """The checkpoints in `folder` named as the best by `monitor` (a run keeps one)."""
    # Also as a direction's best was named before its metric was in the name (`step9-de-fr1.00`).
    names = {_metric_in_name(monitor), monitor.rsplit("/", 1)[-1]}
    either = "|".join(re.escape(name) for name in sorted(names))
    named = re.compile(rf"step\d+-(?:{either})-?\d+\.\d+\.ckpt")
    return sorted(p for p in Path(folder).glob("step*.ckpt") if named.fullmatch(p.name))


class CheckpointError(ValueError):
    """A checkpoint that cannot, or must not, become a translator."""


def save_atomically(checkpoint: dict[str, Any], path: str | os.PathLike) -> None:
    """`torch.save` through `atomic_open`: a kill mid-save leaves the previous file whole.

    A full disk raises an OSError naming `path`, the checkpoint's size and the free space.
    """
    remove_stale_temporaries(path)  # left by a process killed mid-save
    try:
        with atomic_open(path) as f:
            torch.save(checkpoint, f)
    except Exception as e:  # torch.save raises its file's OSError as a RuntimeError
        if not is_disk_full(e):
            raise
        raise disk_full_error(path, serialized_size(checkpoint)) from e


class _ByteCounter:
    """A file that keeps nothing but the number of bytes written to it."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def serialized_size(checkpoint: dict[str, Any]) -> int:
    """The bytes `torch.save` writes for `checkpoint`, without holding them in memory."""
    counter = _ByteCounter()
    torch.save(checkpoint, counter)
    return counter.size


def read_checkpoint(path: str | os.PathLike, mmap: bool = False) -> dict[str, Any]:
    """Load tensors and plain data only (`weights_only`): a checkpoint never runs code here.

    `mmap` maps tensors instead of reading them, for a quick look at the other entries.
    """
    if Path(path).is_dir():
        raise _folder_error(path)
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


def load_checkpoint(path: str | os.PathLike) -> tuple[EncoderDecoder, SubwordTokenizer]:
    """The model, in eval mode, and the tokenizer saved in a training or averaged checkpoint."""
    return translator_from(read_checkpoint(path), where=str(path))


def translator_from(
    checkpoint: dict[str, Any], where: str = "checkpoint"
) -> tuple[EncoderDecoder, SubwordTokenizer]:
    """Rebuild (model, tokenizer) from a loaded checkpoint, refusing parts that do not match.

    The model is of the family its model config names (a Transformer if it names none).
    """
    missing = [key for key in REQUIRED if key not in checkpoint]
    if missing:
        raise CheckpointError(
            f"{where}: not a transformer-nmt checkpoint, it lacks {missing}; checkpoints written "
            "by `train` and `nmt-average` carry the weights, the model config and the tokenizer"
        )
    try:
        tokenizer = tokenizer_from_str(checkpoint["tokenizer"])
    except Exception as e:
        raise CheckpointError(f"{where}: its tokenizer is unreadable or unusable: {e}") from e
    try:
        config = config_from_dict(checkpoint["model_config"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{where}: its model config is unusable: {e}") from e
    if config.vocab_size != tokenizer.vocab_size or config.pad_id != PAD_ID:
        raise CheckpointError(
            f"{where}: the model was built for a vocabulary of {config.vocab_size} with padding "
            f"id {config.pad_id}, but its tokenizer has {tokenizer.vocab_size} tokens with "
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
    model = model_from_config(config)
    try:
        model.load_state_dict(weights)
    except RuntimeError as e:
        raise CheckpointError(f"{where}: the weights do not fit its model config: {e}") from e
    return model.eval(), tokenizer


def model_weights(checkpoint: dict[str, Any]) -> dict[str, Tensor]:
    """The model's state_dict inside a LightningModule checkpoint's."""
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
            kept = ("model_config", "tokenizer", LANGUAGES_KEY)
            shared = {key: checkpoint[key] for key in kept if key in checkpoint}
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


def saved_languages(path: str | os.PathLike) -> Languages | None:
    """The languages and directions a multilingual model's checkpoint records; None: one
    direction (a checkpoint that records none)."""
    saved = read_checkpoint(path, mmap=True).get(LANGUAGES_KEY)
    return None if saved is None else Languages.from_dict(saved)


def last_checkpoints(folder: str | os.PathLike, n: int) -> list[Path]:
    """The `n` periodic checkpoints of `folder` with the highest training steps, oldest first.

    Never `last.ckpt` or the best: those are not spaced in time, and `last.ckpt` is often a copy
    of the newest periodic one. Files of older runs, unmarked, count as periodic by their name.
    """
    by_step: dict[int, Path] = {}
    others = []
    for path in sorted(Path(folder).glob("*.ckpt")):
        checkpoint = read_checkpoint(path, mmap=True)  # the kind, without reading the tensors
        kind = checkpoint.get(KIND_KEY)
        if kind == PERIODIC or kind is None and UNMARKED_PERIODIC.fullmatch(path.name):
            by_step.setdefault(checkpoint.get("global_step", -1), path)
        else:
            others.append(path.name)
    if len(by_step) < n:
        raise _too_few_periodic(folder, n, len(by_step), others)
    return [by_step[step] for step in sorted(by_step)[-n:]]


def _too_few_periodic(
    folder: str | os.PathLike, n: int, found: int, others: list[str]
) -> CheckpointError:
    """Fewer periodic checkpoints than `--average-last n`: say how many, and what else to do."""
    not_periodic = f" ({', '.join(others)}: not periodic, never averaged)" if others else ""
    instead = f"average fewer (--average-last {found})" if found else "train longer"
    return CheckpointError(
        f"{folder} holds {found} periodic checkpoints, fewer than the {n} to average"
        f"{not_periodic}: {instead}, or name checkpoint files instead"
    )


def resolve_checkpoints(paths: list[str], last: int | None = None) -> list[Path]:
    """Checkpoint files from command-line arguments: files as given, or one folder's last N."""
    if last is None:
        for path in paths:
            if Path(path).is_dir():
                raise _folder_error(path, or_average=True)
        return [Path(p) for p in paths]
    if len(paths) != 1 or not Path(paths[0]).is_dir():
        raise CheckpointError(f"--average-last {last} needs exactly one checkpoint folder")
    return last_checkpoints(paths[0], last)


def _folder_error(folder: str | os.PathLike, or_average: bool = False) -> CheckpointError:
    """A folder given as a checkpoint: say which checkpoints it holds, and how to pick."""
    names = sorted(p.name for p in Path(folder).glob("*.ckpt"))
    if not names:
        return CheckpointError(f"{folder} is a folder, not a checkpoint file, and holds no .ckpt")
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    average = ", or average its last N with --average-last N" if or_average else ""
    return CheckpointError(
        f"{folder} is a folder, not a checkpoint file: name one of its checkpoints ({shown})"
        f"{average}"
    )


def load_translator(paths: list[Path]) -> tuple[EncoderDecoder, SubwordTokenizer]:
    """The model and tokenizer of one checkpoint, or of the average of several."""
    if len(paths) == 1:
        return load_checkpoint(paths[0])
    return translator_from(average_checkpoints(paths), where=f"average of {len(paths)}")


def load_members(
    members: list[list[Path]],
) -> tuple[list[EncoderDecoder], SubwordTokenizer]:
    """The models of an ensemble, each one checkpoint or an average, and their one tokenizer.

    A member whose tokenizer differs from the first's is refused, naming it, before any decoding:
    ids would mean different words to different members.
    """
    models, tokenizers = [], []
    for paths in members:
        model, tokenizer = load_translator(paths)
        models.append(model)
        tokenizers.append(tokenizer)
    first = tokenizers[0].to_str()
    for i, (paths, tokenizer) in enumerate(zip(members, tokenizers, strict=True)):
        if tokenizer.to_str() != first:
            raise CheckpointError(
                f"ensemble member {i + 1} ({', '.join(map(str, paths))}) has another vocabulary "
                f"than member 1 ({', '.join(map(str, members[0]))}): members must share the "
                "tokenizer, e.g. runs trained on one data config and BPE"
            )
    return models, tokenizers[0]
