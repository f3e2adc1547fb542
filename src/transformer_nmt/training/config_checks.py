"""Every guard a training config passes before any data is read, each problem named by its key."""

import logging
from collections.abc import Iterator
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from lightning.fabric.accelerators.cuda import num_cuda_devices
from lightning.pytorch.callbacks import WeightAveraging
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.data.padding import longest_padded
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.model.families import DEFAULT_FAMILY, Family, family_of_model
from transformer_nmt.training.callbacks.timed_cooldown import TimedCooldown
from transformer_nmt.training.loggers import wandb_problems
from transformer_nmt.training.lr_schedule import (
    cooldown_problem,
    timed_cooldown_problems,
    warmup_problem,
)
from transformer_nmt.training.resume import ResumePoint
from transformer_nmt.training.sweeps import is_multirun

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """Settings that cannot train together."""


def check_config(cfg: DictConfig, resume: ResumePoint | None = None) -> None:
    """Raise a `ConfigError` listing every inconsistent setting of a training config.

    `resume` is the run's resume point, `cfg.ckpt_path`'s if not given.
    """
    resume = resume or ResumePoint(cfg.get("ckpt_path"))
    problems = [
        *_multirun_problems(cfg),
        *_device_problems(cfg),
        *_model_problems(cfg),
        *_compile_problems(cfg),
        *_schedule_problems(cfg),
        *_batch_problems(cfg),
        *_retention_problems(cfg),
        *_resume_problems(cfg, resume),
        *wandb_problems(cfg),
    ]
    _warn_about_positions(cfg)
    if problems:
        raise ConfigError("inconsistent settings:\n  " + "\n  ".join(problems))


def model_settings(cfg: DictConfig) -> dict[str, Any]:
    """The `model` config as the plain settings a model is built from (no `_target_`)."""
    settings = OmegaConf.to_container(cfg.model, resolve=True)
    settings.pop("_target_", None)
    return settings


def model_family(cfg: DictConfig) -> Family:
    """The family of the model that `model._target_` builds; ValueError if it is none's."""
    target = cfg.model._target_
    try:
        model_class = get_class(target)
    except Exception as e:  # Hydra re-raises whatever the import raised
        raise ValueError(f"model._target_={target} cannot be imported: {e}") from e
    try:
        return family_of_model(model_class)
    except ValueError as e:
        raise ValueError(f"model._target_={target}: {e}") from e


def _model_problems(cfg: DictConfig) -> list[str]:
    """Inconsistent model settings, by the rules of the model's own family."""
    try:
        family = model_family(cfg)
    except ValueError as e:
        return [str(e)]
    return family.settings_problems(model_settings(cfg))


def _multirun_problems(cfg: DictConfig) -> list[str]:
    """A Hydra sweep whose trials would run on several devices through re-launched ranks.

    `ddp` (and `auto` on several GPUs) re-runs the command line once per extra rank: under
    `--multirun` every rank would run the whole sweep, and with a sampling sweeper such as Optuna
    the ranks would silently train different hyperparameters. Not so where SLURM starts the
    ranks: `hydra/launcher=submitit_slurm` runs each trial as a job whose tasks are its ranks,
    which Lightning's SLURMEnvironment joins.
    """
    if not is_multirun():
        return []
    trainer = cfg.trainer
    strategy = str(trainer.get("strategy", "auto"))
    if _single_process(trainer) or "spawn" in strategy or _slurm_tasks_are_ranks(trainer):
        return []
    return [
        f"Hydra multirun with trainer.strategy={strategy} on trainer.devices="
        f"{trainer.get('devices', 1)} would run "
        "the sweep once per rank. Run one device per trial (trainer.devices=1), keep several "
        "devices per trial with trainer.strategy=ddp_spawn, or run each trial as a SLURM job "
        "with one task per device: hydra/launcher=submitit_slurm "
        f"hydra.launcher.tasks_per_node={trainer.get('devices', 1)} "
        f"hydra.launcher.nodes={trainer.get('num_nodes', 1)}."
    ]


def _slurm_tasks_are_ranks(trainer: DictConfig) -> bool:
    """Whether a submitit SLURM job starts exactly the trainer's ranks as its tasks."""
    launcher = HydraConfig.get().launcher
    return (
        str(launcher.get("_target_", "")).endswith("submitit_launcher.SlurmLauncher")
        and launcher.get("tasks_per_node") == trainer.get("devices", 1)
        and launcher.get("nodes") == trainer.get("num_nodes", 1)
    )


def _device_problems(cfg: DictConfig) -> list[str]:
    """More GPUs asked for than the machine has, instead of Lightning's silent CPU fallback."""
    accelerator = str(cfg.trainer.get("accelerator", "auto"))
    devices = cfg.trainer.get("devices", 1)
    wanted = len(devices) if OmegaConf.is_list(devices) else devices
    if not isinstance(wanted, int) or wanted < 1:  # -1 and "auto": whatever is there
        wanted = 1
    on_gpu = accelerator in ("gpu", "cuda")
    if not on_gpu and not (accelerator == "auto" and wanted > 1):
        return []
    found = num_cuda_devices()  # NVML where it can: the parent process must not initialise CUDA
    if found >= wanted:
        return []
    return [
        f"trainer.devices={devices} (trainer.accelerator={accelerator}) asks for {wanted} GPUs "
        f"but this machine has {found}: use trainer.devices={found} or fewer, or run on CPU "
        f"processes with trainer=ddp_cpu trainer.devices={wanted} (DDP over gloo) or "
        "trainer=cpu (one process)"
    ]


def _compile_problems(cfg: DictConfig) -> list[str]:
    """`module.compile` with DDP: refused until measured.

    DDPOptimizer splits the compiled graph at gradient-bucket boundaries, and with dynamic
    shapes that path has failed in PyTorch before; no run here has shown it works.
    """
    trainer = cfg.trainer
    # "auto" compiles on one process only (TranslationModule.configure_model).
    if cfg.module.get("compile") is not True or not _several_processes(trainer):
        return []
    return [
        f"module.compile=true is not supported with DDP (trainer.devices={trainer.devices}, "
        f"trainer.num_nodes={trainer.get('num_nodes', 1)}, trainer.strategy="
        f"{trainer.get('strategy', 'auto')}): set module.compile=false, or train on one device "
        "with trainer.devices=1 and trainer.num_nodes=1"
    ]


def _schedule_problems(cfg: DictConfig) -> list[str]:
    """A warm-up of no count of updates, a cool-down that `trainer.max_steps` cannot hold, or a
    timed one without a time budget."""
    steps = cfg.module.get("cooldown_steps", 0)
    found = [
        warmup_problem(cfg.module.get("warmup_steps", 0)),
        cooldown_problem(steps, cfg.trainer.get("max_steps", -1)),
    ]
    problems = [problem for problem in found if problem]
    for key, callback in _configured(cfg, TimedCooldown):
        minutes, max_time = callback.get("minutes", 0), cfg.trainer.get("max_time")
        problems += timed_cooldown_problems(f"callbacks.{key}.minutes", minutes, steps, max_time)
    return problems


def _batch_problems(cfg: DictConfig) -> list[str]:
    """`data.tokens_per_update` that is no positive count, or set with a conflicting accumulation.

    Either setting decides the accumulation; when both are given, neither silently wins.
    """
    tokens_per_update = cfg.data.get("tokens_per_update")
    if tokens_per_update is None:
        return []
    if not isinstance(tokens_per_update, int) or tokens_per_update < 1:
        return [f"data.tokens_per_update={tokens_per_update} must be a positive count or null"]
    accumulate = cfg.trainer.get("accumulate_grad_batches", 1)
    if accumulate == 1:
        return []
    return [
        f"trainer.accumulate_grad_batches={accumulate} and data.tokens_per_update="
        f"{tokens_per_update} both set the batches per optimizer step: drop "
        "trainer.accumulate_grad_batches to derive it from the tokens, or set "
        "data.tokens_per_update=null to accumulate that many batches"
    ]


def _retention_problems(cfg: DictConfig) -> list[str]:
    """Periodic checkpoints kept fewer than the recipe averages: the average would be refused."""
    policy = (cfg.get("callbacks") or {}).get("checkpoints")
    keep, average = (policy or {}).get("keep_last"), cfg.get("average_last")
    if keep is None or average is None or keep >= average:
        return []
    return [
        f"callbacks.checkpoints.keep_last={keep} keeps fewer checkpoints than "
        f"average_last={average} averages (nmt-evaluate --average-last {average}): keep at "
        f"least {average}, or lower average_last"
    ]


def _several_processes(trainer: DictConfig) -> bool:
    """Whether the trainer settings may start DDP: several devices or nodes, or a ddp strategy."""
    return not _single_process(trainer) or "ddp" in str(trainer.get("strategy", "auto"))


def _single_process(trainer: DictConfig) -> bool:
    """One device (`1` or a list of one id) on one node."""
    devices = trainer.get("devices", 1)
    one_device = devices == 1 or (OmegaConf.is_list(devices) and len(devices) == 1)
    return one_device and trainer.get("num_nodes", 1) == 1


def _resume_problems(cfg: DictConfig, resume: ResumePoint) -> list[str]:
    """A `ckpt_path` that is no file, or whose training the config does not continue."""
    if not resume.resuming:
        return []
    if problem := resume.path_problem():
        return [problem]
    return [*_resumed_average_problems(cfg, resume), *_resumed_model_problems(cfg, resume)]


def _resumed_average_problems(cfg: DictConfig, resume: ResumePoint) -> list[str]:
    """A run trained with `callbacks=ema` keeps its trained weights beside the average (its
    `state_dict`), which only the callback puts back: without it, training would go on from
    the average."""
    if resume.averages_weights and not _averages_weights(cfg):
        return [
            f"ckpt_path={resume.path} was trained with callbacks=ema: its weights are the moving "
            "average, and the trained ones come back only through that callback; resume with "
            "callbacks=ema (and the run's callbacks.ema settings)"
        ]
    return []


def _averages_weights(cfg: DictConfig) -> bool:
    """Whether a configured callback is a Lightning `WeightAveraging` (`callbacks=ema`'s is,
    under whatever key): those write, and read back, `current_model_state`."""
    return any(_configured(cfg, WeightAveraging))


def _configured(cfg: DictConfig, kind: type) -> Iterator[tuple[str, DictConfig]]:
    """(key, config) of each configured callback that builds a `kind`, under whatever key."""
    for key, callback in (cfg.callbacks or {}).items():
        try:
            builds = issubclass(get_class(callback._target_), kind)
        except Exception:  # no class: instantiating it fails later, naming it
            continue
        if builds:
            yield key, callback


def _resumed_model_problems(cfg: DictConfig, resume: ResumePoint) -> list[str]:
    """Model settings of the config that differ from those the checkpoint was trained with."""
    if _model_problems(cfg):
        return []  # reported on their own
    family, settings = model_family(cfg), model_settings(cfg)
    path, saved = resume.path, resume.model_config
    if saved is None:
        return []
    saved_family = saved.get("family", DEFAULT_FAMILY)
    if saved_family != family.config.family:
        return [
            f"ckpt_path={path} holds a {saved_family} model; your config builds a "
            f"{family.config.family} model (model._target_={cfg.model._target_}): resume with "
            "the run's own model settings (e.g. the same experiment=... and model=...)"
        ]
    vocabulary = {key: saved[key] for key in ("vocab_size", "pad_id")}
    ours = family.config(**vocabulary, **settings).to_dict()
    differ = [key for key in ours if key in saved and ours[key] != saved[key]]
    if not differ:
        return []
    trained = ", ".join(f"model.{key}={saved[key]}" for key in differ)
    given = ", ".join(f"model.{key}={ours[key]}" for key in differ)
    return [
        f"ckpt_path={path} was trained with {trained}; your config says {given}: resume with "
        "the run's own model settings (e.g. the same experiment=... and model=...)"
    ]


def _warn_about_positions(cfg: DictConfig) -> None:
    """A kept pair longer than the position table would stop training when it is drawn.

    Only a warning: corpora of short sentences (the toy task) train fine with a small table.
    """
    data, max_positions = cfg.data, cfg.model.get("max_positions", 1024)
    setting = data.get("pad_to_multiple_of", 1)
    positions = longest_padded(data.max_len, setting)
    if max_positions < positions:
        log.warning(
            "data.max_len=%d allows batches of %d positions (max_len + 1 padded as "
            "data.pad_to_multiple_of=%s pads in 16 bits), more than model.max_positions=%d: a "
            "sentence that long would stop training; raise model.max_positions or lower "
            "data.max_len",
            data.max_len,
            positions,
            setting,
            max_positions,
        )


def check_resume(resume: ResumePoint, tokenizer: BPETokenizer) -> None:
    """Refuse to resume from a checkpoint of another tokenizer than the data's, which would
    silently give every id another meaning."""
    saved = resume.tokenizer
    if saved is not None and saved != tokenizer.to_str():
        raise ConfigError(
            f"ckpt_path={resume.path} was trained with another tokenizer than the one the data "
            "settings give (data.corpus, data.src_lang, data.tgt_lang, data.vocab_size, "
            "data.min_frequency): resume with the run's own data settings"
        )
