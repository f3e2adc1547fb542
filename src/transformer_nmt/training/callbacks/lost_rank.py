"""The rank whose loss ended a DDP run, named in the run's log."""

import logging
import subprocess

import lightning as L

log = logging.getLogger(__name__)

# How long a rank whose connection broke may take to be reported dead by the kernel.
EXIT_WAIT_SECONDS = 5


class LostRank(L.Callback):
    """When fit fails on the rank that launched the others, names those that died first.

    A rank killed (out of memory, a node's fault) leaves the others failing in their next
    collective, Gloo at once, NCCL after `ddp_timeout_minutes`, with an error that names no
    rank. Lightning's launcher kills the rest after this hook; torchrun and SLURM name the failed
    rank themselves. `last.ckpt` is as the last save left it: the same command resumes from it.
    """

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        launcher = getattr(trainer.strategy, "launcher", None)
        for local_rank, process in enumerate(getattr(launcher, "procs", []), start=1):
            try:  # a killed rank's sockets close before the kernel reports it dead
                code = process.wait(timeout=EXIT_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                continue  # alive: not the lost one
            if code == 0:
                continue
            rank = trainer.node_rank * trainer.num_devices + local_rank
            log.error(
                "DDP rank %d (pid %d) was lost, exit code %s: the run ends on every rank. "
                "Resume with the same command: it goes on from the run folder's last.ckpt",
                rank,
                process.pid,
                code,
            )
