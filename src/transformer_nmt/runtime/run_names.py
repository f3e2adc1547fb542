"""Names that stay unique where processes start together, and stay the same where a job starts
again: the run folder of a SLURM job (or of each task of a job array), and the log file of each
rank of a run. `conf/hydra/default.yaml` uses them through the resolvers
`training.run_config.register_resolvers` adds."""

import os
from collections.abc import Mapping


def slurm_run_folder(elsewhere: str, environ: Mapping[str, str] = os.environ) -> str:
    """`slurm-<array job>_<task>` in a task of a SLURM job array (SLURM's `%A_%a`),
    `slurm-<job id>` in another SLURM job, `elsewhere` outside SLURM.

    Named by the job, not its start: a requeued job keeps its id, so it finds its folder and
    resumes from the `last.ckpt` there; an array's tasks, which start together, each get one.
    """
    if "SLURM_ARRAY_JOB_ID" in environ and "SLURM_ARRAY_TASK_ID" in environ:
        return f"slurm-{environ['SLURM_ARRAY_JOB_ID']}_{environ['SLURM_ARRAY_TASK_ID']}"
    if "SLURM_JOB_ID" in environ:
        return f"slurm-{environ['SLURM_JOB_ID']}"
    return elsewhere


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
