"""The allocator setting: a process starts again under FAST_MALLOC unless told otherwise."""

import os
import subprocess
import sys

import pytest

from transformer_nmt.allocator import FAST_MALLOC

# GLIBC_TUNABLES after the call, and whether this process image started with it (glibc reads
# it at start-up from the environment given at exec, /proc/self/environ).
PROBE = """
import os
from pathlib import Path
from transformer_nmt.allocator import use_fast_malloc
use_fast_malloc()
start = Path("/proc/self/environ").read_bytes().split(b"\\0")
print(os.environ["GLIBC_TUNABLES"], any(v.startswith(b"GLIBC_TUNABLES=") for v in start))
"""


def tunables_at_start(env: dict) -> list[str]:
    command = [sys.executable, "-c", PROBE]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, check=True
    ).stdout.split()


@pytest.mark.skipif(sys.platform != "linux", reason="GLIBC_TUNABLES is glibc's")
def test_a_process_starts_again_under_the_fast_allocator_unless_told_otherwise():
    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    assert tunables_at_start(plain) == [FAST_MALLOC, "True"]
    own = "glibc.malloc.check=0"
    assert tunables_at_start({**plain, "GLIBC_TUNABLES": own}) == [own, "True"]
