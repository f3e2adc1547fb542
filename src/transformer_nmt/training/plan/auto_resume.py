"""A run started again in its own run folder goes on from its `last.ckpt`, with no `ckpt_path`.

A requeued cluster job, or the same command run again after a pre-emption, finds the state the
first start left: under SLURM the default run folder is named by the job for this
(`runtime/run_names.py`). The run plan (`run_plan.resume_point`) takes it, on global rank 0 for
every rank.
"""

from pathlib import Path

from omegaconf import DictConfig


def run_folder_checkpoint(cfg: DictConfig) -> Path:
    """Where this run's `last.ckpt` lives: the checkpoint policy's folder."""
    policy = (cfg.get("callbacks") or {}).get("checkpoints")
    folder = policy.dirpath if policy else Path(cfg.paths.output_dir) / "checkpoints"
    return Path(folder) / "last.ckpt"


def found_in_run_folder_hint(path: Path) -> str:
    """What to do when the run folder's own checkpoint does not fit the config."""
    return (
        f"(ckpt_path was not given: {path} is this run folder's, resumed from automatically; "
        "run the command that started it, or start this run in a fresh folder: "
        "hydra.run.dir=<another folder>)"
    )
