"""Under SLURM, `--signal=USR1@N` stops the run (`stop.py`) and requeues the job: one resume source.

Lightning's own auto-requeue saves `hpc_ckpt_<n>.ckpt` from inside the signal handler, mid-step,
and a restart prefers that file only when `ckpt_path` is None, while `auto_resume` passes
`last.ckpt`: two resume sources that can disagree. Lightning's signal handling is replaced
(`stop.replace_lightning_sigterm_handling`), so it never runs; its cluster environment is its own
choice, TorchElastic's before SLURM's, so that `srun torchrun` inside sbatch works.
"""

import logging
import os
import signal
import subprocess
from collections.abc import Mapping

from transformer_nmt.training.run.run_lock import is_global_rank_zero

log = logging.getLogger(__name__)

REQUEUE_SIGNAL = signal.SIGUSR1


def log_slurm_job(environ: Mapping[str, str] = os.environ) -> None:
    """Which SLURM job this is and how often it has been requeued; nothing outside SLURM."""
    if (job := slurm_job(environ)) is not None:
        log.info("SLURM job %s, restart %s", job, environ.get("SLURM_RESTART_COUNT", 0))


def slurm_job(environ: Mapping[str, str] = os.environ) -> str | None:
    """The id `scontrol requeue` takes: `<array job>_<task>` in a job array, else the job's."""
    if (array := environ.get("SLURM_ARRAY_JOB_ID")) is not None:
        return f"{array}_{environ['SLURM_ARRAY_TASK_ID']}"
    return environ.get("SLURM_JOB_ID")


def requeue_this_job(environ: Mapping[str, str] = os.environ) -> None:
    """On global rank 0 of a SLURM job, `scontrol requeue` it: it comes back with the same id,
    so in the same run folder. Elsewhere, says that nothing will requeue the run."""
    job = slurm_job(environ)
    if job is None:
        log.warning("%s outside a SLURM job: stopped, nothing to requeue", REQUEUE_SIGNAL.name)
        return
    if not is_global_rank_zero(environ):
        return
    done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
    if done.returncode == 0:
        log.warning("%s: saved last.ckpt and requeued SLURM job %s", REQUEUE_SIGNAL.name, job)
    else:
        log.error(
            "%s: saved last.ckpt, but `scontrol requeue %s` failed: %s; submit the job with "
            "#SBATCH --requeue, or sbatch the same script again: it resumes in its run folder",
            REQUEUE_SIGNAL.name,
            job,
            done.stderr.strip(),
        )
