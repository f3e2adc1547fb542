"""A callback that times a run's start and stops it after its first training batches.

`measure_start.py` adds it to `train.py` with `+callbacks.first_steps=...`: it writes, as JSON,
the seconds from the process's start (train.py's re-exec keeps the process) to the start of the
first training batch, and this process's peak RSS (VmHWM) after `batches` batches, then asks
the Trainer to stop there.
"""

import json
import os
import resource
import time
from pathlib import Path

import lightning as L


def seconds_since_process_start() -> float:
    """From the kernel's start time of this process (in clock ticks after boot) to now."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - ticks / os.sysconf("SC_CLK_TCK")


def peak_rss_mb() -> int:
    """This process's peak resident set, getrusage's ru_maxrss, as measure_data.py reads it."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # kB on Linux


class FirstSteps(L.Callback):
    def __init__(self, out: str, batches: int = 3) -> None:
        self.out, self.batches = Path(out), batches
        self.report: dict = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if not self.report:
            self.report["seconds_to_first_batch"] = round(seconds_since_process_start(), 1)
            self._first = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if batch_idx + 1 == self.batches:
            self.report["seconds_of_first_batches"] = round(time.perf_counter() - self._first, 1)
            self.report["batches"] = self.batches
            self.report["peak_rss_mb"] = peak_rss_mb()
            self.out.write_text(json.dumps(self.report))
            trainer.should_stop = True
