"""A training stage: `train(cfg)` in the stage's folder, composed from `python train.py` overrides.

The folder is the run folder (`hydra.run.dir`), so an interrupted stage resumes from its
`checkpoints/last.ckpt` as any run started again in its folder does (training/plan/auto_resume.py).
What the stage gives the next is the run's best checkpoint by validation, as a user would pick.
"""

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from transformer_nmt.checkpoint import best_checkpoints
from transformer_nmt.pipelines.checks import type_problems
from transformer_nmt.pipelines.stages import Stage, stage_key
from transformer_nmt.runtime.configs import checkout_root, config_dir
from transformer_nmt.training.plan.auto_resume import run_folder_checkpoint
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.run_config import register_resolvers
from transformer_nmt.training.plan.run_plan import check_config

PLACEHOLDER = "<stage folder>"  # the run folder while hashing: the key cannot hold itself


def compose_run(overrides: Sequence[str], corpus: dict[str, Any] | None = None) -> DictConfig:
    """The config `python train.py <overrides>` runs, its training corpus replaced by `corpus`."""
    register_resolvers()
    root = checkout_root()
    if root is not None:
        os.environ.setdefault("PROJECT_ROOT", str(root))
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir(root)), version_base="1.3"):
            cfg = compose("train", overrides=list(overrides), return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as e:  # a misspelt key, group or value
        raise ConfigError(f"the overrides do not compose: {' '.join(str(e).split())}") from None
    if corpus is not None:
        with open_dict(cfg):
            cfg.data.corpus = corpus
    return cfg


def check_stage(cfg: DictConfig) -> None:
    """Refuse, before any stage runs, a training stage's config that its run would refuse
    later (after hours of translation): one process, settings of the right types, and the
    rules `train` checks first."""
    check_one_process(cfg)
    resolved = _in_folder(cfg, PLACEHOLDER)
    problems = type_problems(resolved)
    if problems:
        raise ConfigError("; ".join(problems))
    check_config(resolved)


def check_one_process(cfg: DictConfig) -> None:
    """Refuse a multi-process training config: Lightning starts the other ranks by running this
    command again, which would run the pipeline's other stages in each of them."""
    devices, nodes = cfg.trainer.get("devices", 1), cfg.trainer.get("num_nodes", 1)
    if devices != 1 or nodes != 1:
        raise ConfigError(
            f"trainer.devices={devices}, trainer.num_nodes={nodes}: nmt-pipeline trains in its "
            "own process; train such a model with nmt-train and give it as --reverse or "
            "--teacher, or set trainer.devices=1"
        )


def data_config(cfg: DictConfig) -> DictConfig:
    """The run's `data` node, resolved (its interpolations may name the run folder)."""
    return _in_folder(cfg, PLACEHOLDER).data


def train_stage(
    work: Path, name: str, cfg: DictConfig, inputs: Sequence[Path] = ()
) -> tuple[Path, bool]:
    """Train `cfg` in its stage folder, or reuse it; returns (its best checkpoint by the checkpoint
    policy's `monitor`, or last.ckpt where it saved none, and whether it ran).

    inputs: files the config reads whose contents the key must hold (synthetic corpora).
    """
    task = _in_folder(cfg, PLACEHOLDER)
    with open_dict(task):
        task.pop("hydra")
    settings = OmegaConf.to_container(task, resolve=True)
    settings.pop("paths")  # where things go, not what is trained
    stage = Stage(work, name, stage_key(settings, inputs))
    cfg = _in_folder(cfg, str(stage.folder))
    runs = stage.start()
    if runs:
        from transformer_nmt.train import train  # torch and Lightning, only when a stage trains

        metrics = train(cfg)
        monitor = OmegaConf.select(cfg, "callbacks.checkpoints.monitor")
        best = best_checkpoint(run_folder_checkpoint(cfg), monitor)
        stage.finish({"checkpoint": str(best), "metrics": metrics})
    return Path(stage.record()["checkpoint"]), runs


def best_checkpoint(last: Path, monitor: str | None) -> Path:
    """The best checkpoint by `monitor` beside a run's `last` (the checkpoint policy keeps one),
    or `last` where there is none (no validation ran)."""
    best = [] if monitor is None else best_checkpoints(last.parent, monitor)
    return max(best, key=lambda p: p.stat().st_mtime_ns) if best else last


def _in_folder(cfg: DictConfig, folder: str) -> DictConfig:
    """The config with `folder` as the run folder, Hydra's too (`${hydra:runtime.output_dir}`)."""
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = folder
    HydraConfig.instance().set_config(cfg)
    return cfg
