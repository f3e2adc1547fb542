"""A stop every rank agrees on: a signal only sets a flag; the step's all_reduce carries it.

SIGTERM (pre-emption, `scontrol requeue`, a time limit), SIGUSR1 (SLURM's `--signal=USR1@N`) and
SIGINT (Ctrl-C) only record that they came. A handler runs wherever the main thread is, between
two collectives or inside one, so a collective in it (Lightning 2.6's broadcast) pairs with
another rank's different collective and hangs, under NCCL until its timeout. Instead, each
training step's sum over the ranks (`TranslationModule._per_token_mean`: loss, NLL, tokens)
also sums which signals each rank has seen, and at every update's optimizer step all ranks read
the same sums: the first update whose sums hold a signal is the last one on every rank. The end
of `trainer.max_time` rides in the same sums (`time_budget.TimeBudget`). Fit then
ends normally (`trainer.should_stop`, without the validation Lightning would add), the checkpoint
callback writes `last.ckpt` in `on_train_end`, and for USR1 in a SLURM job global rank 0
requeues it once the W&B runs have finished (`train.fit_and_report`): the requeue's SIGTERM
reaches every process of the job, W&B's service too, which loses the rows it has not written.

Early stopping (`EarlyStop`) needs no vote: it decides from the monitored validation metric, which
every rank computes from the same statistics summed over the ranks, so every rank decides alike
after the same validation.

Reading the sums costs no host sync: they are copied to the host without blocking as they are
reduced, and at the optimizer step the host waits only for that copy, which the device reaches
before the backward pass the host has already queued behind it.
"""

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor

from transformer_nmt.training.lightning_internals import (
    SignalConnector,
    replace_signal_connector,
    skip_next_validation,
    stop_sigterm_broadcast,
)
from transformer_nmt.training.step.val_metrics import mode as better_mode

log = logging.getLogger(__name__)

# In order of precedence when ranks saw different ones: a requeue asked for wins.
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)
# Seconds a stop may need to end its update and write last.ckpt: what the recipes'
# --signal=USR1@300 leaves it.
STOP_SECONDS = 300


def exit_status(signum: int) -> int:
    """The shell's status for a process ended by `signum`: 143 for SIGTERM, 130 for Ctrl-C."""
    return 128 + signum


class StopSignals:
    """The stop signals this process received while recording, in order of arrival."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._depth = 0

    @contextmanager
    def recording(self) -> Iterator[None]:
        """While inside, TERM, USR1 and INT only append to `received` (a second Ctrl-C raises
        KeyboardInterrupt: stop at once). Nested uses share one record, cleared at the outermost."""
        if threading.current_thread() is not threading.main_thread():
            yield  # Python runs handlers only in the main thread
            return
        if self._depth == 0:
            self.received.clear()
        previous = {signum: signal.signal(signum, self._record) for signum in STOP_SIGNALS}
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _record(self, signum: int, frame: object) -> None:
        self.received.append(signum)
        if self.aborted():
            raise KeyboardInterrupt

    def aborted(self) -> bool:
        """Whether Ctrl-C came twice: stop at once, not after an agreed update."""
        return self.received.count(signal.SIGINT) > 1


SIGNALS = StopSignals()


class StopVotes:
    """A rank's part of the agreement: its signals, and whether its clock says the time budget
    is spent, into the step's sum; the summed votes out."""

    def __init__(self) -> None:
        # On the host: ranks that saw each of STOP_SIGNALS, then those out of time.
        self._summed: Tensor | None = None
        self._copied: torch.cuda.Event | None = None
        # Whether `trainer.max_time` is spent, on the clock that decides it (`TimeBudget`'s).
        self.out_of_time: Callable[[], bool] | None = None

    def ballot(self, like: Tensor) -> list[Tensor]:
        """0-dim tensors on `like`'s device, one per stop signal and one for the time budget:
        1 where this process saw it, or its clock ended the budget."""
        votes = [s in SIGNALS.received for s in STOP_SIGNALS]
        votes.append(self.out_of_time is not None and self.out_of_time())
        # full_like fills on the device; torch.tensor(flags) would copy from the host.
        return [torch.full_like(like, float(vote)) for vote in votes]

    def count(self, summed: Tensor) -> None:
        """Starts the copy of the ballots summed over the ranks (len(STOP_SIGNALS) + 1,) to the
        host."""
        if self._summed is None:
            zeros = [0.0] * (len(STOP_SIGNALS) + 1)
            pinned = summed.is_cuda  # a copy from the device into pinned memory does not block
            self._summed = torch.tensor(zeros, dtype=summed.dtype, device="cpu", pin_memory=pinned)
        self._summed.copy_(summed, non_blocking=True)
        if summed.is_cuda:
            self._copied = torch.cuda.Event()
            self._copied.record()

    def agreed(self) -> int | None:
        """The stop signal the last counted sums hold, or None: the same answer on every rank."""
        counts = self._counts()
        signals = counts[: len(STOP_SIGNALS)]
        return next((s for s, n in zip(STOP_SIGNALS, signals, strict=True) if n), None)

    def agreed_out_of_time(self) -> bool:
        """Whether the last counted sums end the time budget: the same answer on every rank."""
        return bool(self._counts()[-1])

    def _counts(self) -> list[float]:
        if self._summed is None:
            return [0.0] * (len(STOP_SIGNALS) + 1)
        if self._copied is not None:
            self._copied.synchronize()
        return self._summed.tolist()


class Stopped(SystemExit):
    """Training stopped after an agreed update; `code` is the process's exit status."""


def raise_if_stopped(trainer: L.Trainer) -> None:
    """`Stopped` if the trainer's `AgreedStop` stopped training: with 128 + the signal on global
    rank 0, 0 on the other ranks (see `train.train`)."""
    stop = next((c for c in trainer.callbacks if isinstance(c, AgreedStop)), None)
    if stop is not None and stop.signum is not None:
        raise Stopped(exit_status(stop.signum) if trainer.is_global_zero else 0)


class AgreedStop(L.Callback):
    """Stops training on every rank after the update whose summed votes hold a stop signal.

    `signum` and `step` say which signal and after which update, once stopped. The module's
    `stop_votes` (a `StopVotes`) carries the votes through its step's all_reduce.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.step: int | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        replace_lightning_sigterm_handling(trainer)

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if self.signum is not None or (signum := pl_module.stop_votes.agreed()) is None:
            return
        self.signum, self.step = signum, trainer.global_step + 1
        trainer.should_stop = True
        # Lightning validates before a should_stop; a pre-emption leaves no time for it.
        skip_next_validation(trainer)
        if trainer.is_global_zero:
            log.warning(
                "%s: every rank stops after update %d", signal.Signals(signum).name, self.step
            )

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # After on_train_end, where last.ckpt was written whole.
        if self.signum is None or not trainer.is_global_zero:
            return
        name = signal.Signals(self.signum).name
        if (policy := trainer.checkpoint_callback) is None:
            log.warning("%s at step %d: no checkpoint callback, nothing saved", name, self.step)
        else:
            log.warning(
                "%s at step %d: saved %s; resume with ckpt_path=%s, or the same command in the "
                "same run folder",
                name,
                self.step,
                policy.last_model_path,
                policy.last_model_path,
            )


class EarlyStop(L.Callback):
    """Stops training after `module.early_stopping_patience` validations in a row that did not
    better the best `val/<module.monitor>` (lower for TER and the loss, higher for the scores).

    Read from the module at setup; does nothing where the patience is None. Every rank reads the
    same monitored value (see the module's docstring), so every rank stops after the same
    validation, through `trainer.should_stop`: training ends as at `max_steps`, the checkpoint
    policy writes `last.ckpt`, and `train` reports the best. The best and the count are saved in
    every checkpoint, so a resumed run goes on counting, and one resumed after it stopped early
    stops again before its first update (unless given a larger patience).
    """

    def __init__(self) -> None:
        self.monitor: str | None = None
        self.patience: int | None = None
        self.best: float | None = None
        self.wait = 0  # validations since the best
        self.stopped_at: int | None = None  # the step training stopped after

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.monitor = getattr(pl_module, "monitor", None)
        self.patience = getattr(pl_module, "hparams", {}).get("early_stopping_patience")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.patience is not None and self.wait >= self.patience:
            self._stop(trainer, "a resumed run that had stopped early")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.patience is None or trainer.sanity_checking:
            return
        if trainer.state.fn != TrainerFn.FITTING or self.stopped_at is not None:
            return
        score = trainer.callback_metrics.get(self.monitor)
        if score is None:
            return
        value = float(score)
        if self._improves(value):
            self.best, self.wait = value, 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self._stop(trainer, f"{self.wait} validations without a better {self.monitor}")

    def _improves(self, value: float) -> bool:
        if value != value or abs(value) == float("inf"):  # NaN or infinite: never better
            return False
        if self.best is None:
            return True
        return value < self.best if better_mode(self.monitor) == "min" else value > self.best

    def _stop(self, trainer: L.Trainer, why: str) -> None:
        self.stopped_at = trainer.global_step
        trainer.should_stop = True
        # On every rank, in its own log: each says where it stopped.
        log.info(
            "Early stopping: %s (best %s, patience %d); every rank stops after step %d",
            why,
            self.best,
            self.patience,
            self.stopped_at,
        )

    def state_dict(self) -> dict[str, Any]:
        return {"monitor": self.monitor, "best": self.best, "wait": self.wait}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Another metric's count says nothing about this one (resuming refuses that anyway).
        if state_dict.get("monitor") == self.monitor:
            self.best, self.wait = state_dict.get("best"), state_dict.get("wait", 0)


class _RecordingSignalConnector(SignalConnector):
    """Lightning's signal connector, registering `SIGNALS.recording()` in place of its handlers."""

    def __init__(self, trainer: L.Trainer) -> None:
        super().__init__(trainer)
        self._recording = ExitStack()

    def register_signal_handlers(self) -> None:
        self._recording.enter_context(SIGNALS.recording())

    def teardown(self) -> None:
        self._recording.close()


def replace_lightning_sigterm_handling(trainer: L.Trainer) -> None:
    """Turns off Lightning 2.6's SIGTERM handling, which has no public switch.

    Its handler broadcasts from inside itself (see the module's docstring), and its epoch loop
    broadcasts a flag before every micro-batch, a host sync each (`_broadcast_sigterm_tensor`).
    Both replaced here; `trainer.received_sigterm` stays False, so Lightning never raises
    `SIGTERMException` mid-step.
    """
    replace_signal_connector(trainer, _RecordingSignalConnector)
    stop_sigterm_broadcast(trainer)


def torchrun_stop_problems(
    environ: Mapping[str, str] = os.environ, agent_command: list[str] | None = None
) -> list[str]:
    """What keeps a stop under torchrun from the time SLURM's signal leaves it; [] elsewhere.

    torchrun's agent forwards only the signals its `--signals-to-handle` names (not USR1 by
    default: USR1 would end the agent, and the ranks with it) and kills the ranks
    `--shutdown-timeout` seconds (30 by default) after forwarding one, however long the signal
    left before the time limit. `agent_command` is the agent's command line (default: read from
    /proc), where `--shutdown-timeout` shows; its environment's default reaches the ranks too.
    """
    if "TORCHELASTIC_RUN_ID" not in environ:
        return []
    problems = []
    forwarded = environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    if "SLURM_JOB_ID" in environ and "SIGUSR1" not in forwarded.replace(" ", "").split(","):
        problems.append(
            f"torchrun forwards {forwarded} only: SLURM's --signal=USR1@N would end it, and the "
            "ranks with it, before any checkpoint; add --signals-to-handle="
            f"{forwarded},SIGUSR1 to torchrun"
        )
    agent_command = agent_command if agent_command is not None else parent_command()
    shutdown = _option(agent_command, "--shutdown-timeout", "--shutdown_timeout")
    shutdown = shutdown or environ.get("PET_SHUTDOWN_TIMEOUT")
    shutdown = int(shutdown or environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", 30))
    if shutdown < STOP_SECONDS:
        problems.append(
            f"torchrun kills the ranks {shutdown} s after it forwards a stop signal, less than "
            f"the {STOP_SECONDS} s a stop may need to end its update and save last.ckpt: give "
            f"torchrun --shutdown-timeout={STOP_SECONDS} (or TORCH_ELASTIC_SHUTDOWN_TIMEOUT="
            f"{STOP_SECONDS}), and SLURM's --signal=USR1@N at least as long a lead"
        )
    return problems


def warn_if_torchrun_cuts_the_stop(environ: Mapping[str, str] = os.environ) -> None:
    """Warns, once per torchrun agent, what `torchrun_stop_problems` finds."""
    if environ.get("LOCAL_RANK", "0") == "0":
        for problem in torchrun_stop_problems(environ):
            log.warning("%s", problem)


def parent_command() -> list[str]:
    """This process's parent's command line (torchrun's, for its ranks); [] if unreadable."""
    try:
        return Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def _option(command: list[str], *names: str) -> str | None:
    """The value `command` gives an option as `--name=value` or `--name value`; None if absent."""
    for i, word in enumerate(command):
        for name in names:
            if word.startswith(f"{name}="):
                return word.split("=", 1)[1]
            if word == name and i + 1 < len(command):
                return command[i + 1]
    return None
