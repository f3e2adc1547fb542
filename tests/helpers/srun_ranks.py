"""The ranks of a `python train.py` as `srun --ntasks=2` starts them: a process per task, each with
the variables srun sets, none started by another; a timeout turns a hung rank into a failure."""

import subprocess
import sys
from pathlib import Path

from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT
from helpers.loopback import free_ports

TASKS = 2


def srun_env(rank: int, job: str, port: int) -> dict[str, str]:
    """What srun sets on task `rank` of a 2-task step of job `job` on one node."""
    return {
        **ddp_env(), "SLURM_JOB_ID": job, "SLURM_STEP_ID": "0", "SLURM_JOB_NAME": "train",
        "SLURM_NTASKS": str(TASKS), "SLURM_NTASKS_PER_NODE": str(TASKS), "SLURM_NNODES": "1",
        "SLURM_NODELIST": "localhost", "SLURM_NODEID": "0", "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }  # fmt: skip


def run_srun_ranks(
    overrides: list[str], job: str, timeout: float
) -> list[subprocess.CompletedProcess]:
    """`python train.py <overrides>` on 2 srun-like ranks of trainer=ddp_cpu; each rank's exit
    status and output (stdout and stderr together). A rank alive after `timeout` seconds is
    killed and its status is None."""
    port = free_ports(1)[0]
    command = [sys.executable, "train.py", *overrides, "trainer=ddp_cpu", "trainer.devices=2"]
    ranks = [
        subprocess.Popen(
            command, cwd=ROOT, env=srun_env(rank, job, port),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for rank in range(TASKS)
    ]  # fmt: skip
    done = []
    for rank in ranks:
        try:
            output, _ = rank.communicate(timeout=timeout)
            done.append(subprocess.CompletedProcess(rank.args, rank.returncode, output))
        except subprocess.TimeoutExpired:
            rank.kill()
            output, _ = rank.communicate()
            done.append(subprocess.CompletedProcess(rank.args, None, output))
    return done


def run_folder_overrides(tmp_path: Path) -> list[str]:
    """Both ranks' run folder, logs and cache under tmp_path (tmp_path/run is the run folder)."""
    return [
        f"hydra.run.dir={tmp_path}/run", f"paths.log_dir={tmp_path}",
        f"paths.cache_dir={tmp_path}/cache",
    ]  # fmt: skip
