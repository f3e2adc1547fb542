"""Settings that contradict each other fail before any data is read, each named by its key."""

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from transformer_nmt.checkpoint import read_checkpoint
from transformer_nmt.data.batching import round_up
from transformer_nmt.data.tokenizer import BPETokenizer

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """Settings that cannot train together."""


def check_config(cfg: DictConfig) -> None:
    """Raise a `ConfigError` listing every inconsistent setting of a training config."""
    problems = [*_model_problems(cfg), *_compile_problems(cfg), *_resume_problems(cfg)]
    if problems:
        raise ConfigError("inconsistent settings:\n  " + "\n  ".join(problems))


def _model_problems(cfg: DictConfig) -> list[str]:
    model, data = cfg.model, cfg.data
    problems = []
    unset = [key for key in ("d_k", "d_v") if model.get(key) is None]
    if unset and model.d_model % model.h:
        problems.append(
            f"model.d_model={model.d_model} is not divisible by model.h={model.h}, so "
            f"{' and '.join(f'model.{k}' for k in unset)} (d_model / h by default) cannot be "
            "derived: change one of them or set model.d_k and model.d_v"
        )
    # A kept pair has up to max_len tokens plus EOS (source) or BOS (target input), padded up to
    # a multiple. Only a warning: corpora of short sentences (the toy task) train fine with a
    # small table.
    multiple = data.get("pad_to_multiple_of", 1)
    positions = round_up(data.max_len + 1, multiple)
    if model.get("max_positions", 1024) < positions:
        log.warning(
            "data.max_len=%d allows batches of %d positions (max_len + 1 padded to a multiple of "
            "data.pad_to_multiple_of=%d), more than model.max_positions=%d: a sentence that long "
            "would stop training; raise model.max_positions or lower data.max_len",
            data.max_len,
            positions,
            multiple,
            model.max_positions,
        )
    return problems


def _compile_problems(cfg: DictConfig) -> list[str]:
    """`module.compile` with DDP: refused until measured.

    DDPOptimizer splits the compiled graph at gradient-bucket boundaries, and with dynamic
    shapes that path has failed in PyTorch before; no run here has shown it works.
    """
    trainer = cfg.trainer
    if not cfg.module.get("compile") or not _several_processes(trainer):
        return []
    return [
        f"module.compile=true is not supported with DDP (trainer.devices={trainer.devices}, "
        f"trainer.num_nodes={trainer.get('num_nodes', 1)}, trainer.strategy="
        f"{trainer.get('strategy', 'auto')}): set module.compile=false, or train on one device "
        "with trainer.devices=1 and trainer.num_nodes=1"
    ]


def _several_processes(trainer: DictConfig) -> bool:
    """Whether the trainer settings may start DDP: several devices or nodes, or a ddp strategy."""
    devices = trainer.get("devices", 1)
    one_device = devices == 1 or (OmegaConf.is_list(devices) and len(devices) == 1)
    ddp = "ddp" in str(trainer.get("strategy", "auto"))
    return not one_device or trainer.get("num_nodes", 1) > 1 or ddp


def _resume_problems(cfg: DictConfig) -> list[str]:
    path = cfg.get("ckpt_path")
    if path is None or Path(path).is_file():
        return []
    state = "is a folder" if Path(path).is_dir() else "does not exist"
    return [
        f"ckpt_path={path} {state}: give a checkpoint file such as "
        "<run dir>/checkpoints/last.ckpt, or drop ckpt_path to start afresh"
    ]


def check_resume(ckpt_path: str | None, tokenizer: BPETokenizer) -> None:
    """Refuse to resume from a checkpoint that is unsafe, unreadable, or of another tokenizer.

    Read weights-only first, so that a checkpoint carrying code is refused before Lightning
    loads it; a tokenizer other than the data's would silently give every id another meaning.
    """
    if ckpt_path is None:
        return
    # mmap: the tokenizer without reading the tensors, which Lightning loads next anyway.
    saved = read_checkpoint(ckpt_path, mmap=True).get("tokenizer")
    if saved is not None and saved != tokenizer.to_str():
        raise ConfigError(
            f"ckpt_path={ckpt_path} was trained with another tokenizer than the one the data "
            "settings give (data.corpus, data.src_lang, data.tgt_lang, data.vocab_size, "
            "data.min_frequency): resume with the run's own data settings"
        )
