"""The allocator settings: a process starts again under FAST_MALLOC unless told otherwise, and
torch's allocator gets expandable segments unless the user's setting names them."""

import os
import subprocess
import sys

import pytest

from transformer_nmt.runtime.allocator import FAST_MALLOC, use_expandable_segments

# GLIBC_TUNABLES after the call, and whether this process image started with it (glibc reads
# it at start-up from the environment given at exec, /proc/self/environ).
PROBE = """
import os
from pathlib import Path
from transformer_nmt.runtime.allocator import use_fast_malloc
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


@pytest.mark.parametrize(
    "user, expected",
    [
        ({}, {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}),
        (
            {"PYTORCH_ALLOC_CONF": "max_split_size_mb:64"},
            {"PYTORCH_ALLOC_CONF": "max_split_size_mb:64,expandable_segments:True"},
        ),
        (  # torch reads the CUDA one first: the option goes where the user's setting is
            {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"},
            {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64,expandable_segments:True"},
        ),
        (
            {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"},
            {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"},
        ),
    ],
)
def test_expandable_segments_are_on_unless_the_user_says_otherwise(monkeypatch, user, expected):
    for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        monkeypatch.delenv(name, raising=False)
    for name, value in user.items():
        monkeypatch.setenv(name, value)
    use_expandable_segments()
    settings = {n: os.environ.get(n) for n in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    assert {n: v for n, v in settings.items() if v is not None} == expected


def test_torch_reads_the_setting_with_the_users_options_kept():
    """Set after torch is imported, before any allocation, as in `nmt-train`'s processes."""
    probe = (
        "import torch\n"
        "from transformer_nmt.runtime.allocator import use_expandable_segments\n"
        "use_expandable_segments()\n"
        "print(torch._C._accelerator_getAllocatorSettings())"
    )
    plain = {k: v for k, v in os.environ.items() if "ALLOC_CONF" not in k}
    env = {**plain, "PYTORCH_ALLOC_CONF": "max_split_size_mb:64"}
    command = [sys.executable, "-c", probe]
    read = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    assert read.strip() == "max_split_size_mb:64,expandable_segments:True"
