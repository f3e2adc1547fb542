"""The `trainer` settings a run is refused for before the Trainer is built: devices that are not
there, compile under DDP, a sweep whose ranks would each run it, a spawning strategy, a
validation interval that is neither updates nor a share of an epoch; and that interval in the
batches Lightning counts."""

from hydra.core.hydra_config import HydraConfig
from lightning.fabric.accelerators.cuda import num_cuda_devices
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.training.run.sweeps import is_multirun


def trainer_problems(cfg: DictConfig) -> list[str]:
    """Every refused `trainer` setting, each naming its key."""
    return [
        *_spawn_problems(cfg),
        *_multirun_problems(cfg),
        *_device_problems(cfg),
        *_compile_problems(cfg),
        *_val_check_problems(cfg),
    ]


def _spawn_problems(cfg: DictConfig) -> list[str]:
    """`ddp_spawn` and its variants: a run they start cannot end as the run says it did.

    Lightning pickles the callbacks into spawned ranks (the malloc_trim callback holds a handle
    that does not pickle) and hands back only rank 0's last metrics: the agreed stop and the
    best score stay in the ranks, so a stopped run would exit 0 reporting its last score.
    """
    strategy = str(cfg.trainer.get("strategy", "auto"))
    if "spawn" not in strategy:
        return []
    return [
        f"trainer.strategy={strategy} is not supported: its ranks, spawned, would not hand a "
        "stop or the best score back to this process. Use trainer=ddp (or trainer=ddp_cpu), "
        "which starts each rank as this command; in a sweep, trainer.devices=1 per trial or "
        "hydra/launcher=submitit_slurm with a task per device"
    ]


def _val_check_problems(cfg: DictConfig) -> list[str]:
    """`trainer.val_check_interval`: updates, a share of an epoch, or a time, nothing else."""
    interval = cfg.trainer.get("val_check_interval", 1.0)
    updates = isinstance(interval, int) and not isinstance(interval, bool) and interval >= 1
    share = isinstance(interval, float) and 0 < interval <= 1
    if updates or share or interval is None or isinstance(interval, str):
        return []
    return [
        f"trainer.val_check_interval={interval}: give the updates (optimizer steps) between two "
        "validations as an integer >= 1, e.g. 1000, the share of each epoch as a float in "
        "(0, 1], e.g. 0.25 (1.0: at each epoch's end), or a time as 'DD:HH:MM:SS'"
    ]


def val_check_batches(
    interval: int | float | str, accumulate_grad_batches: int, every_n_epochs: int | None
) -> int | float | str:
    """`trainer.val_check_interval` as Lightning counts it: updates into batches.

    Lightning counts an integer interval in batches, from each epoch's start (an epoch starts an
    update, so every multiple of the accumulation in it ends one), or over the whole run with
    `check_val_every_n_epoch=None`, where an epoch's last update, shorter when the epoch's batches
    are not a multiple of the accumulation, would put validations inside later updates. A share
    of an epoch or a time passes unchanged.
    """
    if not isinstance(interval, int) or accumulate_grad_batches == 1:
        return interval
    if every_n_epochs is None:
        raise ValueError(
            f"trainer.val_check_interval={interval} updates with trainer.check_val_every_n_epoch"
            f"=null and accumulate_grad_batches={accumulate_grad_batches}: over epochs Lightning "
            "counts batches, and an epoch's shorter last update would shift validation into "
            "later updates. Set trainer.check_val_every_n_epoch=1 (updates counted from each "
            "epoch's start)"
        )
    return interval * accumulate_grad_batches


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
        return []  # spawn: refused on its own (`_spawn_problems`)
    return [
        f"Hydra multirun with trainer.strategy={strategy} on trainer.devices="
        f"{trainer.get('devices', 1)} would run "
        "the sweep once per rank. Run one device per trial (trainer.devices=1), or run each "
        "trial as a SLURM job with one task per device: hydra/launcher=submitit_slurm "
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


def _several_processes(trainer: DictConfig) -> bool:
    """Whether the trainer settings may start DDP: several devices or nodes, or a ddp strategy."""
    return not _single_process(trainer) or "ddp" in str(trainer.get("strategy", "auto"))


def _single_process(trainer: DictConfig) -> bool:
    """One device (`1` or a list of one id) on one node."""
    devices = trainer.get("devices", 1)
    one_device = devices == 1 or (OmegaConf.is_list(devices) and len(devices) == 1)
    return one_device and trainer.get("num_nodes", 1) == 1
