"""What machine a benchmark ran on, for its record: the CPU's name and how busy it was."""

import os
import platform
from pathlib import Path


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")  # Linux only: elsewhere the platform's name for the CPU
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def load_average() -> str:
    """Other jobs on the machine make every number slower: the record should show them."""
    return "load average over 1, 5, 15 min: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())
