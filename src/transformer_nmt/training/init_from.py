"""Fine-tuning: a new run that starts from another model's weights, with parts of it frozen.

`init_from` names a checkpoint, a folder of them (with `init_average_last=N`: their average), or a
MarianMT folder (`nmt-import hf`'s input). The run takes the parent's architecture, weights and
vocabulary (the data config trains no tokenizer), and everything else new: optimizer, schedule,
step and data position start as in a run from scratch. `init_freeze` names parts whose weights
training leaves as they are: `embeddings` (source, target, and the output projection tied to
them), `encoder`, `decoder`, or any module path such as `decoder.layers.0`.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from hydra.utils import get_class
from omegaconf import DictConfig

from transformer_nmt.checkpoint import CheckpointError, load_translator, resolve_checkpoints
from transformer_nmt.data.framing import ADDED_TOKENS
from transformer_nmt.data.tokenizer import SubwordTokenizer
from transformer_nmt.model import EncoderDecoder
from transformer_nmt.training.config_checks import ConfigError

# `init_freeze` names beyond module paths.
ALIASES = {"embeddings": ("src_embed", "tgt_embed")}


class Parent(NamedTuple):
    """The model a run starts from, and its vocabulary."""

    model: EncoderDecoder
    tokenizer: SubwordTokenizer


def load_parent(cfg: DictConfig) -> Parent | None:
    """The parent `cfg.init_from` names, checked against the config; None without one.

    Raises:
        ConfigError: an unreadable parent, a family other than `cfg.model`'s, or an
            `init_freeze` name that matches no weights, each named; before anything is written.
    """
    init_from = cfg.get("init_from")
    if init_from is None:
        return None
    average_last = cfg.get("init_average_last")
    try:
        model, tokenizer = read_parent(Path(init_from), average_last)
    except (CheckpointError, ValueError, OSError) as e:
        raise ConfigError(f"init_from={init_from}: {e}") from e
    family = get_class(cfg.model._target_)
    if not isinstance(model, family):
        raise ConfigError(
            f"init_from={init_from} holds a {type(model).__name__} ({model.config.family}), but "
            f"model={cfg.model._target_} builds a {family.__name__}: choose the parent's family"
        )
    problems = fit_problems(cfg, model, tokenizer)
    if problems:
        raise ConfigError(f"init_from={init_from}: " + "; ".join(problems))
    freeze(model, cfg.get("init_freeze") or [])
    return Parent(model.train(), tokenizer)


def fit_problems(cfg: DictConfig, model: EncoderDecoder, tokenizer: SubwordTokenizer) -> list[str]:
    """Data settings the parent cannot train with."""
    problems = []
    longest = cfg.data.max_len + ADDED_TOKENS
    if longest > model.config.max_positions:
        problems.append(
            f"data.max_len={cfg.data.max_len} lets a side reach {longest} positions but the "
            f"parent's position table holds {model.config.max_positions}: set data.max_len <= "
            f"{model.config.max_positions - ADDED_TOKENS}"
        )
    if cfg.data.get("bpe_dropout") and not hasattr(tokenizer, "with_dropout"):
        problems.append(
            f"data.bpe_dropout={cfg.data.bpe_dropout} drops BPE merges, but the parent's "
            f"tokenizer is {type(tokenizer).__name__}: set data.bpe_dropout=0"
        )
    return problems


def read_parent(path: Path, average_last: int | None) -> tuple[EncoderDecoder, SubwordTokenizer]:
    """A MarianMT folder's model, or a checkpoint's, or the average of a folder's last N."""
    if path.is_dir() and (path / "config.json").is_file():
        # Imported here: transformers takes seconds, and only MarianMT folders need it.
        from transformer_nmt.export.hf_import import read_folder

        return read_folder(path)
    if path.is_dir() and average_last is None:
        names = ", ".join(sorted(p.name for p in path.glob("*.ckpt"))[:5]) or "no .ckpt"
        raise CheckpointError(
            f"a folder ({names}): name one of its checkpoints, or set init_average_last=N to "
            "start from the average of its last N"
        )
    return load_translator(resolve_checkpoints([str(path)], average_last))


def freeze(model: EncoderDecoder, parts: Sequence[str]) -> None:
    """Stop training the weights of each part (a module path or an ALIASES name)."""
    for part in parts:
        prefixes = ALIASES.get(part, (part,))
        matched = [
            p
            for name, p in model.named_parameters(remove_duplicate=False)
            if any(name == prefix or name.startswith(f"{prefix}.") for prefix in prefixes)
        ]
        if not matched:
            tops = sorted({name.split(".")[0] for name, _ in model.named_parameters()})
            raise ConfigError(
                f"init_freeze: {part!r} names no weights of the parent; name embeddings, or a "
                f"module path under one of {', '.join(tops)} (e.g. encoder, decoder.layers.0)"
            )
        for p in matched:
            p.requires_grad_(False)
