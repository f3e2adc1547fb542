"""Pick the training precision the hardware runs fastest, without initialising CUDA.

The choice is made before the Trainer exists. Had it initialised CUDA (as
`torch.cuda.is_bf16_supported()` and `torch.cuda.get_device_capability()` do), the fork
launchers (`ddp_fork`, `ddp_notebook`, Lightning's choice in Jupyter) could not start their
processes. So GPUs are counted and their compute capability read through NVML, the driver's
management library, which is how `torch.cuda.device_count()` counts them before CUDA starts.
"""

import ctypes
import logging
from pathlib import Path

import torch

log = logging.getLogger(__name__)

# CPU features that make bf16 matmuls native; without them bf16 is emulated and far slower
# than fp32 (measured here on an AVX2-only EPYC: about 30x slower training steps).
NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# bf16 tensor cores arrived with Ampere (compute capability 8.0). Older GPUs (V100 7.0, T4 7.5)
# emulate bf16, slower than fp16, which their tensor cores run natively.
NATIVE_BF16_CUDA_CAPABILITY = (8, 0)


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    try:
        flags = cpuinfo.read_text()
    except OSError:
        return False
    return any(flag in flags.split() for flag in NATIVE_BF16_CPU_FLAGS)


def cuda_capabilities() -> list[tuple[int, int]] | None:
    """(major, minor) compute capability of each visible GPU, read through NVML.

    Honours CUDA_VISIBLE_DEVICES as CUDA does. None where NVML cannot tell: no NVML library, a
    driver older than CUDA 11's, MIG devices.
    """
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit() != 0:
            return None
        capabilities = []
        for index in range(torch.cuda.device_count()):
            handle, major, minor = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int()
            nvml_index = torch.cuda._get_nvml_device_index(index)  # after CUDA_VISIBLE_DEVICES
            if nvml.nvmlDeviceGetHandleByIndex_v2(nvml_index, ctypes.byref(handle)) != 0:
                return None
            query = nvml.nvmlDeviceGetCudaComputeCapability
            if query(handle, ctypes.byref(major), ctypes.byref(minor)) != 0:
                return None
            capabilities.append((major.value, minor.value))
    except (OSError, AttributeError, RuntimeError):  # no library, no such symbol, not visible
        return None
    return capabilities


def resolve_precision(precision: str | int, accelerator: str) -> str | int:
    """The configured precision, with "auto" replaced by the fastest one available."""
    return auto_precision(accelerator) if precision == "auto" else precision


def auto_precision(accelerator: str) -> str:
    """The fastest precision that trains as well as fp32, decided without initialising CUDA.

    GPUs: "bf16-mixed" if every visible GPU runs bf16 natively (compute capability 8.0 or
    later), else "16-mixed", whose loss scaling Lightning adds. CPUs: "bf16-mixed" with native
    bf16 matmuls, else "32-true".
    """
    # NVML counts the GPUs first; torch falls back to the CUDA driver only if NVML fails.
    if accelerator in ("gpu", "cuda", "auto") and torch.cuda.device_count() > 0:
        capabilities = cuda_capabilities()
        if capabilities is None:
            log.warning(
                "NVML cannot tell the GPUs' compute capability: training in 16-mixed, which "
                "every CUDA GPU runs; set trainer.precision=bf16-mixed on Ampere or later GPUs"
            )
            return "16-mixed"
        native = min(capabilities) >= NATIVE_BF16_CUDA_CAPABILITY
        return "bf16-mixed" if native else "16-mixed"
    return "bf16-mixed" if cpu_has_native_bf16() else "32-true"
