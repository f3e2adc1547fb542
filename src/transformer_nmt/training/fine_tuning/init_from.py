"""Fine-tuning: a new run that starts from another model's weights, with parts of it frozen.

`init.from` names a checkpoint, a folder of them (with `init.average_last=N`: their average), or a
MarianMT folder (`nmt-import hf`'s input). The run takes the parent's architecture, weights and
vocabulary (a data config asking for another is refused, unless `init.extend_vocab` adds its
tokens: parent_vocab.py), and everything else new: optimizer, schedule, step and data position
start as in a run from scratch, unless `init.keep` names them: `optimizer` (Adam's moments and
step counts; this run's betas and eps), `schedule` (the learning rate continues at the parent's
step), `step` (the global step, which `trainer.max_steps` counts on from) and `data` (the
parent's epoch, from where it stopped, which `trainer.max_epochs` counts on from; only with the
parent's batching: parent_position.py) come from a parent checkpoint. `init.freeze` names
parts whose weights training leaves as they are: `embeddings` (source, target, and the output
projection tied to them), `encoder`, `decoder`, or any module path such as `decoder.layers.0`.
"""

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import lightning as L
import torch
from hydra.utils import get_class
from omegaconf import DictConfig, ListConfig

from transformer_nmt.checkpoint import (
    CheckpointError,
    average_checkpoints,
    read_checkpoint,
    resolve_checkpoints,
    translator_from,
)
from transformer_nmt.data.framing import ADDED_TOKENS
from transformer_nmt.data.tokenizer import SubwordTokenizer
from transformer_nmt.model import EncoderDecoder
from transformer_nmt.training.fine_tuning.parent_position import position_problems
from transformer_nmt.training.fine_tuning.parent_vocab import (
    extend_vocab,
    frozen_rows_problem,
    vocab_problem,
)
from transformer_nmt.training.fine_tuning.renamed_keys import renamed_problem
from transformer_nmt.training.lightning_internals import set_global_step
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.plan.run_plan import saved_plan

# What only a run with `init.from` reads.
PARENT_SETTINGS = ("average_last", "keep", "freeze", "extend_vocab")
# `init.freeze` names beyond module paths.
ALIASES = {"embeddings": ("src_embed", "tgt_embed")}
# `init.keep` names: the parent checkpoint's entry each takes.
KEEPABLE = {
    "optimizer": "optimizer_states",
    "schedule": "lr_schedulers",
    "step": "global_step",
    "data": "loops",
}


class Parent(NamedTuple):
    """The model a run starts from, its vocabulary, the training state `init.keep` takes, and
    the plan's record of it (`record`)."""

    model: EncoderDecoder
    tokenizer: SubwordTokenizer
    kept: dict[str, Any] = {}
    record: dict[str, Any] = {}


class KeepParentState(L.Callback):
    """Puts the parent's optimizer, schedule, step and data position into this run before its
    first step.

    At fit start, before Lightning restores a resumed run's own state, which then wins.
    """

    def __init__(self, kept: dict[str, Any]) -> None:
        self.kept = kept

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        optimizer = trainer.optimizers[0]
        if "optimizer" in self.kept:
            groups = optimizer.state_dict()["param_groups"]  # this run's settings
            optimizer.load_state_dict(
                {"state": self.kept["optimizer"][0]["state"], "param_groups": groups}
            )
        if "schedule" in self.kept:
            scheduler = trainer.lr_scheduler_configs[0].scheduler
            scheduler.load_state_dict(self.kept["schedule"][0])
            for group, lr in zip(optimizer.param_groups, scheduler.get_last_lr(), strict=True):
                group["lr"] = lr  # the first step's rate is the parent's next one
        if "data" in self.kept:
            # The parent's epoch and batch progress, as a resume restores them: the loader then
            # skips the epoch's trained batches (datamodule._skip_trained_batches). The step
            # count comes along and is set below.
            trainer.fit_loop.load_state_dict(self.kept["data"]["fit_loop"])
        if "step" in self.kept or "data" in self.kept:
            set_global_step(trainer, self.kept.get("step", 0))


def override(value: Any) -> str:
    """A setting's value as a command line gives it: `[step]`, `true`."""
    if isinstance(value, ListConfig | list):
        return f"[{','.join(map(str, value))}]"
    return str(value).lower() if isinstance(value, bool) else str(value)


def load_parent(cfg: DictConfig) -> Parent | None:
    """The parent `cfg.init.from` names, read once and checked against the config; None without
    one. Global rank 0 runs it as it plans the run; the plan records it (`Parent.record`), and
    the other ranks build the same parent from that record (`parent_from_plan`).

    Raises:
        ConfigError: an old `init_*` key, an `init` setting without `init.from`, an unreadable
            parent, a family other than `cfg.model`'s, a data config asking for another
            vocabulary, a kept data position under another batching, or an `init.freeze` name
            that matches no weights, each named; before anything is written.
    """
    if problem := renamed_problem(cfg.keys()):
        raise ConfigError(problem)
    init = cfg.get("init") or {}
    init_from = init.get("from")
    if init_from is None:
        settings = [key for key in PARENT_SETTINGS if init.get(key)]
        if orphans := [f"init.{key}={override(init[key])}" for key in settings]:
            raise ConfigError(
                f"{', '.join(orphans)} only apply with init.from=<checkpoint or folder>: give "
                "the parent to start from, or drop them"
            )
        return None
    average_last = init.get("average_last")
    keep = list(init.get("keep") or [])
    try:
        files = parent_files(Path(init_from), average_last)
        model, tokenizer, checkpoint = read_parent(files)
        kept = read_kept(files, checkpoint, average_last, keep)
        if problem := step_problem(kept.get("step"), cfg.trainer.get("max_steps", -1)):
            raise ConfigError(problem)
    except (CheckpointError, ValueError, OSError) as e:
        raise ConfigError(f"init.from={init_from}: {e}") from e
    family = get_class(cfg.model._target_)
    if not isinstance(model, family):
        raise ConfigError(
            f"init.from={init_from} holds a {type(model).__name__} ({model.config.family}), but "
            f"model={cfg.model._target_} builds a {family.__name__}: choose the parent's family"
        )
    extend = init.get("extend_vocab")
    problems = fit_problems(cfg, model, tokenizer)
    recorded = (checkpoint or {}).get("datamodule_hyper_parameters") or {}
    if not extend and (problem := vocab_problem(cfg.data, recorded, tokenizer)):
        problems.append(problem)
    if "data" in kept:
        problems += position_problems(cfg, checkpoint)
    if problems:
        raise ConfigError(f"init.from={init_from}: " + "; ".join(problems))
    record = {
        "path": str(init_from),
        "files": [str(f) for f in files],
        "step": (checkpoint or {}).get("global_step"),
        "weights_sha256": weights_digest(model),
        "kept": keep,
        "frozen": list(init.get("freeze") or []),
        "extend_vocab": bool(extend),
    }
    return as_configured(cfg, model, tokenizer, kept, record)


def resumed_parent(cfg: DictConfig, resume: ResumePoint) -> dict[str, Any] | None:
    """The parent record of the plan saved in the checkpoint a fine-tuning run resumes from,
    checked against `cfg.init`; None where there is none to take (not resuming, no `init.from`,
    or a checkpoint older than the record, or one unreadable, which the plan then refuses), and
    the parent is then read as at a start.

    A resumed run never reads the parent: its checkpoint holds the weights and vocabulary, and
    the record what was frozen and kept (`parent_from_plan`).

    Raises:
        ConfigError: an `init` setting other than the one the run started with, each named.
    """
    init = cfg.get("init") or {}
    if init.get("from") is None or not resume.resuming or resume.path_problem():
        return None
    try:
        saved = getattr(saved_plan(resume), "parent", None)
    except CheckpointError:
        return None
    if saved is None:
        return None
    mine = {
        "from": (str(init["from"]), saved["path"]),
        "keep": (list(init.get("keep") or []), saved["kept"]),
        "freeze": (list(init.get("freeze") or []), saved["frozen"]),
        "extend_vocab": (bool(init.get("extend_vocab")), saved["extend_vocab"]),
    }
    differ = [
        f"init.{name}={override(ours)} (it started with {override(theirs)})"
        for name, (ours, theirs) in mine.items()
        if ours != theirs
    ]
    if differ:
        raise ConfigError(
            f"{resume.path} goes on fine-tuning with other init settings than it started with: "
            f"{'; '.join(differ)}; resume with those it started with, or give the new run "
            "another run folder (hydra.run.dir)"
        )
    return saved


def parent_from_plan(
    cfg: DictConfig, record: dict[str, Any], resume: ResumePoint | None = None
) -> Parent:
    """The parent global rank 0 decided, from the files its plan names, unchecked but for its
    weights: a file that changed since rank 0 read it is refused. A resumed run's, from the
    checkpoint it resumes (its vocabulary already extended), the parent's files left unread."""
    if resume is not None and resume.resuming:
        model, tokenizer = translator_from(resume.checkpoint, where=str(resume.path))
        freeze(model, record["frozen"])
        return Parent(model.train(), tokenizer, {}, record)  # the resumed state is kept instead
    files = [Path(f) for f in record["files"]]
    model, tokenizer, checkpoint = read_parent(files)
    if weights_digest(model) != record["weights_sha256"]:
        raise ConfigError(
            f"init.from={record['path']}: its weights differ from those global rank 0 read "
            "as it planned the run (the file changed meanwhile, or this host sees another): give "
            "every rank the same parent file"
        )
    kept = {name: checkpoint[KEEPABLE[name]] for name in record["kept"]}
    return as_configured(cfg, model, tokenizer, kept, record)


def as_configured(
    cfg: DictConfig,
    model: EncoderDecoder,
    tokenizer: SubwordTokenizer,
    kept: dict[str, Any],
    record: dict[str, Any],
) -> Parent:
    """The parent with its vocabulary extended and its parts frozen as `record` says."""
    if record["extend_vocab"]:
        model, tokenizer = extend_vocab(cfg, model, tokenizer)
    freeze(model, record["frozen"])
    if record["extend_vocab"] and (problem := frozen_rows_problem(model)):
        raise ConfigError(problem)
    return Parent(model.train(), tokenizer, kept, record)


def weights_digest(model: EncoderDecoder) -> str:
    """The first 16 hex digits of the sha256 of the model's weights, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return digest.hexdigest()[:16]


def step_problem(step: int | None, max_steps: int) -> str | None:
    """A kept step that leaves `trainer.max_steps` nothing to train."""
    if step is None or max_steps < 0 or max_steps > step:
        return None
    return (
        f"init.keep names step, and the parent is at step {step}, so trainer.max_steps="
        f"{max_steps} trains nothing: set trainer.max_steps above {step}"
    )


def read_kept(
    files: list[Path],
    checkpoint: dict[str, Any] | None,
    average_last: int | None,
    keep: Sequence[str],
) -> dict[str, Any]:
    """The parent checkpoint's state of each `init.keep` part, checked before any write."""
    if not keep:
        return {}
    unknown = [name for name in keep if name not in KEEPABLE]
    if unknown:
        raise ConfigError(
            f"init.keep: {', '.join(unknown)} is no keepable part; name some of "
            f"{', '.join(KEEPABLE)}, or leave init.keep=[] to start them new"
        )
    if checkpoint is None or len(files) > 1 or average_last is not None:
        raise ConfigError(
            f"init.keep={list(keep)} takes one training checkpoint's state, but init.from is "
            f"{'an average of several' if average_last else 'a folder'}: name one .ckpt file, "
            "or set init.keep=[]"
        )
    missing = [name for name in keep if checkpoint.get(KEEPABLE[name]) in (None, [])]
    if missing:
        raise ConfigError(
            f"init.keep: the checkpoint holds no {', '.join(KEEPABLE[n] for n in missing)} "
            "(written without training state, e.g. by nmt-average); set init.keep=[]"
        )
    return {name: checkpoint[KEEPABLE[name]] for name in keep}


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


def parent_files(path: Path, average_last: int | None) -> list[Path]:
    """A MarianMT or M2M-100 folder, the checkpoint, or a folder's last N checkpoints to average."""
    if path.is_dir() and (path / "config.json").is_file():
        return [path]
    if path.is_dir() and average_last is None:
        names = ", ".join(sorted(p.name for p in path.glob("*.ckpt"))[:5]) or "no .ckpt"
        raise CheckpointError(
            f"a folder ({names}): name one of its checkpoints, or set init.average_last=N to "
            "start from the average of its last N"
        )
    return resolve_checkpoints([str(path)], average_last)


def read_parent(
    files: list[Path],
) -> tuple[EncoderDecoder, SubwordTokenizer, dict[str, Any] | None]:
    """The model and tokenizer of a MarianMT folder, a checkpoint or the average of several,
    each file read once; and the checkpoint itself (the last one's, for an average), whose other
    entries the checks and `init.keep` read (None for a MarianMT folder)."""
    if files[0].is_dir():
        # Imported here: transformers takes seconds, and only MarianMT folders need it.
        from transformer_nmt.export.hf_import import read_folder

        return (*read_folder(files[0]), None)
    if len(files) > 1:
        model, tokenizer = translator_from(average_checkpoints(files), f"average of {len(files)}")
        return model, tokenizer, read_checkpoint(files[-1], mmap=True)
    checkpoint = read_checkpoint(files[0])
    return (*translator_from(checkpoint, where=str(files[0])), checkpoint)


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
                f"init.freeze: {part!r} names no weights of the parent; name embeddings, or a "
                f"module path under one of {', '.join(tops)} (e.g. encoder, decoder.layers.0)"
            )
        for p in matched:
            p.requires_grad_(False)
