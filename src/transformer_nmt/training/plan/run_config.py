"""The run folder's `.hydra/`: the config the run uses, written once the run is accepted.

Hydra would write it before the task starts (`hydra.output_subdir`, null in `conf/hydra/`): a
start that is then refused, because the folder's `last.ckpt` is another model's or another run
holds the folder, would overwrite the record of the run that owns it, which the model card reads.
Also the resolvers that name the run folder and its logs in `conf/hydra/default.yaml`.
"""

from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from transformer_nmt.runtime.atomic import write_atomically
from transformer_nmt.runtime.run_names import rank_log_suffix, slurm_run_folder

FOLDER = ".hydra"


def write_run_config(cfg: DictConfig) -> None:
    """`config.yaml` (the task config), `hydra.yaml` and `overrides.yaml`, as Hydra names them.

    Called once, by global rank 0, once the config is checked and the run lock is held: the
    config as given; what the run derives from it is the run plan's (`run_plan.RunPlan`).
    Without Hydra (`train(cfg)` from a notebook) there is no run folder to write to.
    """
    if not HydraConfig.initialized():
        return
    hydra = HydraConfig.get()
    folder = Path(hydra.runtime.output_dir) / FOLDER
    task = cfg.copy()
    OmegaConf.set_struct(task, False)
    task.pop("hydra", None)  # tests compose with the Hydra node; a run's task config has none
    write_atomically(folder / "config.yaml", OmegaConf.to_yaml(task))
    write_atomically(folder / "hydra.yaml", OmegaConf.to_yaml({"hydra": hydra}))
    write_atomically(folder / "overrides.yaml", OmegaConf.to_yaml(hydra.overrides.task))


def register_resolvers() -> None:
    """`${slurm_run_folder:<elsewhere>}` and `${rank_log_suffix:}`, for the configs Hydra
    composes."""
    for resolve in (slurm_run_folder, rank_log_suffix):
        if not OmegaConf.has_resolver(resolve.__name__):
            OmegaConf.register_new_resolver(resolve.__name__, resolve)
