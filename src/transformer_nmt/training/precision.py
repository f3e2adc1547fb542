"""Pick the training precision the hardware runs fastest."""

from pathlib import Path

import torch

# CPU features that make bf16 matmuls native; without them bf16 is emulated and far slower
# than fp32 (measured here on an AVX2-only EPYC: about 30x slower training steps).
NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    try:
        flags = cpuinfo.read_text()
    except OSError:
        return False
    return any(flag in flags.split() for flag in NATIVE_BF16_CPU_FLAGS)


def resolve_precision(precision: str | int, accelerator: str) -> str | int:
    """The configured precision, with "auto" replaced by the fastest one available."""
    return auto_precision(accelerator) if precision == "auto" else precision


def auto_precision(accelerator: str) -> str:
    """ "bf16-mixed" on GPUs with bf16 and on CPUs with native bf16 matmuls, else "32-true"."""
    if accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available():
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "32-true"
    return "bf16-mixed" if cpu_has_native_bf16() else "32-true"
