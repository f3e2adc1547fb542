"""Names that stay unique where processes start together: the run folder of each task of a SLURM
job array, and the log file of each rank of a run. `conf/hydra/default.yaml` uses them through
the resolvers `training.run_config.register_resolvers` adds."""

import os
from collections.abc import Mapping


def slurm_job_suffix(environ: Mapping[str, str] = os.environ) -> str:
    """`_<array job>_<task>` in a task of a SLURM job array (SLURM's `%A_%a`), `_<job id>` in
    another SLURM job, '' elsewhere: run folders are named to the second, and an array's tasks
    start in the same one."""
    if "SLURM_ARRAY_JOB_ID" in environ and "SLURM_ARRAY_TASK_ID" in environ:
        return f"_{environ['SLURM_ARRAY_JOB_ID']}_{environ['SLURM_ARRAY_TASK_ID']}"
    if "SLURM_JOB_ID" in environ:
        return f"_{environ['SLURM_JOB_ID']}"
    return ""


def launcher_rank(environ: Mapping[str, str] = os.environ) -> str:
    """This process's rank as its launcher set it, before any process group exists: "0" for
    global rank 0 (also a plain `python train.py`).

    torchrun sets RANK on every rank; Lightning starts the other ranks of a node with LOCAL_RANK
    and NODE_RANK set (named `<node>.<local>` off node 0); SLURM sets SLURM_PROCID on every task.
    """
    if "RANK" in environ:
        return str(int(environ["RANK"]))
    node, local = int(environ.get("NODE_RANK", 0)), int(environ.get("LOCAL_RANK", 0))
    if node:
        return f"{node}.{local}"
    if local:
        return str(local)
    return str(int(environ.get("SLURM_PROCID", 0)))


def rank_log_suffix(environ: Mapping[str, str] = os.environ) -> str:
    """'' on global rank 0 (its log is `train.log`), `.rank<R>` on another: a file per rank."""
    rank = launcher_rank(environ)
    return "" if rank == "0" else f".rank{rank}"
