"""glibc's allocator setting for CPU training, applied by starting the process again.

glibc's default returns large freed blocks to the kernel and maps them again every step: CPU
training then spends a large share of its time in the kernel (experiments/allocator/). Keeping
freed memory in the process avoids that; set GLIBC_TUNABLES yourself to opt out.
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
