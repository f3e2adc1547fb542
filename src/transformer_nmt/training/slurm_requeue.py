"""Under SLURM, `--signal=USR1@N` saves `last.ckpt` and requeues the job: one resume source.

Lightning's own auto-requeue (SLURMEnvironment's default) saves `hpc_ckpt_<n>.ckpt` from inside
the signal handler, mid-step, and a restart prefers that file only when `ckpt_path` is None,
while `auto_resume` passes `last.ckpt`: two resume sources that can disagree. It is off here;
USR1 takes the SIGTERM path instead (every rank finishes its batch, the checkpoint
policy saves), and global rank 0 runs `scontrol requeue` once the run has closed
(experiments/scale_out/README.md).
"""

import logging
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from lightning.fabric.plugins.environments import ClusterEnvironment, SLURMEnvironment

from transformer_nmt.training.run_lock import is_global_rank_zero

log = logging.getLogger(__name__)

REQUEUE_SIGNAL = signal.SIGUSR1


def slurm_environment() -> list[ClusterEnvironment]:
    """Trainer plugins: where SLURM started the ranks, its environment without auto-requeue."""
    return [SLURMEnvironment(auto_requeue=False)] if SLURMEnvironment.detect() else []


@contextmanager
def requeue_on_signal(environ: Mapping[str, str] = os.environ) -> Iterator[None]:
    """In a SLURM job, USR1 stops training as SIGTERM does, and the job is requeued on the way
    out of this block (after the run lock and the loggers have closed). Elsewhere, nothing."""
    job = environ.get("SLURM_JOB_ID")
    if job is None or not SLURMEnvironment.detect():
        yield
        return
    log.info("SLURM job %s, restart %s", job, environ.get("SLURM_RESTART_COUNT", 0))
    received = []

    def stop_as_sigterm(signum: int, frame: object) -> None:
        received.append(signum)
        os.kill(os.getpid(), signal.SIGTERM)  # Lightning's handler: stop after this batch

    previous = signal.signal(REQUEUE_SIGNAL, stop_as_sigterm)
    try:
        yield
    except SystemExit:  # how `train` ends once the SIGTERM path has saved
        if received and is_global_rank_zero(environ):
            requeue(job)
        raise
    finally:
        signal.signal(REQUEUE_SIGNAL, previous)


def requeue(job: str) -> None:
    """`scontrol requeue` this job: it comes back with the same id, so the same run folder."""
    # The requeue ends this job's tasks with SIGTERM: this one has saved and is ending anyway.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
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
