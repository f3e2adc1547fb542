"""The allocator settings training starts with: glibc's on CPUs, torch's CUDA allocator's.

glibc's default returns large freed blocks to the kernel and maps them again every step: CPU
training then spends a large share of its time in the kernel (experiments/allocator/). Keeping
freed memory in the process avoids that; set GLIBC_TUNABLES yourself to opt out. On GPUs,
batches of every length bucket fragment the CUDA allocator's fixed-size segments: memory held
but not usable, an out-of-memory error mid-epoch at a budget the probe found to fit.
Expandable segments grow one mapping instead; set expandable_segments yourself to opt out.
"""

import os
import sys

# hugetlb=1 asks for transparent huge pages where the kernel gives them on request: far fewer
# page faults as the heap grows (glibc 2.35+; older ones ignore it).
FAST_MALLOC = (
    "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736:glibc.malloc.hugetlb=1"
)


def use_fast_malloc() -> None:
    """Start this process again under FAST_MALLOC, unless GLIBC_TUNABLES is set already.

    glibc reads GLIBC_TUNABLES at start-up only, so the process replaces itself (same pid, same
    command line); call it first thing in a script's `if __name__ == "__main__":`.
    """
    if sys.platform == "linux" and "GLIBC_TUNABLES" not in os.environ:
        os.environ["GLIBC_TUNABLES"] = FAST_MALLOC
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


# torch reads the first of these that is set (the CUDA one warns that it is deprecated).
ALLOC_CONF = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
EXPANDABLE_SEGMENTS = "expandable_segments:True"


def use_expandable_segments() -> None:
    """Add expandable_segments:True to the allocator setting torch reads, unless it names them.

    torch reads it when CUDA's allocator starts, at the first allocation: call it before any.
    Any other option the user set stays as set.
    """
    name = next((n for n in ALLOC_CONF if os.environ.get(n)), ALLOC_CONF[-1])
    setting = os.environ.get(name, "")
    if "expandable_segments" not in setting:
        os.environ[name] = f"{setting},{EXPANDABLE_SEGMENTS}" if setting else EXPANDABLE_SEGMENTS
