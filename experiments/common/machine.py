"""What machine a benchmark ran on, for its record: the CPU's name and how busy it was."""

import os
import platform
from pathlib import Path

from transformer_nmt.training.plan.precision import NATIVE_BF16_CPU_FLAGS

FLAGS = ("avx2", "avx512f", *NATIVE_BF16_CPU_FLAGS)  # what decides fp32 and bf16 speed


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")  # Linux only: elsewhere the platform's name for the CPU
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def cpu_description() -> str:
    """The CPU's model name and which of FLAGS it has."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    lines = info.splitlines()
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    present = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in FLAGS)
    return f"{cpu_name()}; {present}"


def load_average() -> str:
    """Other jobs on the machine make every number slower: the record should show them."""
    return "load average over 1, 5, 15 min: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())
