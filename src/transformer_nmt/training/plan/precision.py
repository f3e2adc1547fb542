"""Pick the training precision the hardware runs fastest, without initialising CUDA.

The choice is made before the Trainer exists. Had it initialised CUDA (as
`torch.cuda.is_bf16_supported()` and `torch.cuda.get_device_capability()` do), the fork
launchers (`ddp_fork`, `ddp_notebook`, Lightning's choice in Jupyter) could not start their
processes. So GPUs are counted and their compute capability read through NVML, the driver's
management library, which is how `torch.cuda.device_count()` counts them before CUDA starts.
A resumed run keeps the precision its checkpoint trained in, or is refused where it cannot.
"""

import ctypes
import logging
import os
import statistics
import time
from pathlib import Path

import torch

from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.resume import ResumePoint

log = logging.getLogger(__name__)

# CPU features that make bf16 matmuls native; without them bf16 is emulated, far slower than fp32.
NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# Native is not enough: bf16 training pays only where bf16 matmuls are much faster than fp32
# ones, since the rest of a step (casts, norms, softmax) gains nothing; some native CPUs
# multiply slower in bf16 than in fp32 (experiments/speed/README.md).
BF16_MIN_MATMUL_SPEEDUP = 1.5
# The first process's CPU decision, inherited by the DDP ranks it starts: ranks must agree.
AUTO_CPU_PRECISION_ENV = "TRANSFORMER_NMT_AUTO_CPU_PRECISION"
# What auto chooses between on a CPU, and so what a resumed CPU run may continue in.
AUTO_CPU_PRECISIONS = ("32-true", "bf16-mixed")
# bf16 tensor cores arrived with Ampere (compute capability 8.0). Older GPUs (V100 7.0, T4 7.5)
# emulate bf16, slower than fp16, which their tensor cores run natively.
NATIVE_BF16_CUDA_CAPABILITY = (8, 0)


def cpu_has_native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    try:
        flags = cpuinfo.read_text()
    except OSError:
        return False
    return any(flag in flags.split() for flag in NATIVE_BF16_CPU_FLAGS)


def cpu_bf16_matmul_speedup(n: int = 1024, pairs: int = 5) -> float:
    """How many times faster one core multiplies n x n matrices in bf16 than fp32 (about 0.3 s).

    One thread, fp32 and bf16 timed in turn, the median of the pairs' ratios: beside bursty load
    this stays on one side of the bar where timing each dtype in its own block strayed across
    it (experiments/speed/README.md).
    """
    # Its own generator: drawn from the global one, the operands shifted every later dropout
    # mask, so that precision=auto and the precision it picks trained differently on one seed.
    generator = torch.Generator().manual_seed(0)
    operands = {
        dtype: torch.randn(2, n, n, generator=generator, device="cpu").to(dtype)
        for dtype in (torch.float32, torch.bfloat16)
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for a, b in operands.values():
            a @ b  # oneDNN builds its kernel on the first call
        ratios = []
        for _ in range(pairs):
            seconds = {}
            for dtype, (a, b) in operands.items():
                start = time.perf_counter()
                a @ b
                seconds[dtype] = time.perf_counter() - start
            ratios.append(seconds[torch.float32] / seconds[torch.bfloat16])
    finally:
        torch.set_num_threads(threads)
    return statistics.median(ratios)


def auto_cpu_precision(resumed: str | None = None) -> str:
    """bf16 mixed precision where bf16 matmuls are native and measured much faster, else fp32.

    Decided once per run: the DDP ranks a process starts inherit its answer, and a run resumed
    from a checkpoint trained on a CPU in `resumed` (`ResumePoint.cpu_precision`) trains on in it.
    """
    if AUTO_CPU_PRECISION_ENV in os.environ:
        return os.environ[AUTO_CPU_PRECISION_ENV]
    if not cpu_has_native_bf16():
        precision = "32-true"
    elif resumed in AUTO_CPU_PRECISIONS:
        precision = resumed
        log.info(
            "precision=auto: training on in %s, as the checkpoint did; set trainer.precision "
            "to change it",
            precision,
        )
    else:
        speedup = cpu_bf16_matmul_speedup()
        precision = "bf16-mixed" if speedup >= BF16_MIN_MATMUL_SPEEDUP else "32-true"
        log.info(
            "precision=auto: bf16 matmuls run %.2fx as fast as fp32 ones on this CPU "
            "(bf16 needs %.1fx): training in %s",
            speedup,
            BF16_MIN_MATMUL_SPEEDUP,
            precision,
        )
    os.environ[AUTO_CPU_PRECISION_ENV] = precision
    return precision


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


def resolve_precision(
    precision: str | int, accelerator: str, resume: ResumePoint | None = None
) -> str | int:
    """The configured precision, with "auto" replaced by the fastest one available.

    Resumed, "auto" is the precision the checkpoint trained in, not a new decision: on a CPU, a
    timing on a busy machine can disagree with the first; on GPUs, a job requeued onto older
    ones would silently turn bf16 into fp16 (`on_gpus_as_trained` refuses that, by name).
    """
    if precision != "auto":
        return precision
    if resume is None or not resume.resuming:
        return auto_precision(accelerator)
    chosen = auto_precision(accelerator, resume.cpu_precision)
    if on_gpus(accelerator):
        return on_gpus_as_trained(chosen, resume.gpu_precision, resume.path)
    return chosen


def on_gpus_as_trained(chosen: str, trained: str | None, checkpoint: str | None) -> str:
    """precision=auto on GPUs for a run resumed from `checkpoint`, which trained on GPUs in
    `trained` (None: elsewhere, or unsaid): that precision, where these GPUs run it natively.

    Raises `ConfigError` naming both precisions and the setting that picks either, for a bf16
    run resumed on GPUs that only emulate bf16.
    """
    if trained is None or trained == chosen:
        return chosen
    if trained == "bf16-mixed":
        raise ConfigError(
            f"ckpt_path={checkpoint} trained in bf16-mixed, which these GPUs only emulate "
            f"(compute capability below {'.'.join(map(str, NATIVE_BF16_CUDA_CAPABILITY))}), "
            f"so precision=auto would switch it to {chosen}: set trainer.precision=bf16-mixed "
            f"to go on as it trained, slower, or trainer.precision={chosen} to switch"
        )
    log.info(
        "precision=auto: training on in %s, as %s did; set trainer.precision=%s to switch",
        trained,
        checkpoint,
        chosen,
    )
    return trained


def auto_precision(accelerator: str, resumed: str | None = None) -> str:
    """The fastest precision that trains as well as fp32, decided without initialising CUDA.

    GPUs: "bf16-mixed" if every visible GPU runs bf16 natively (compute capability 8.0 or
    later), else "16-mixed", whose loss scaling Lightning adds. CPUs: `auto_cpu_precision`,
    given the CPU precision of the checkpoint resumed from, if any.
    """
    if on_gpus(accelerator):
        capabilities = cuda_capabilities()
        if capabilities is None:
            log.warning(
                "NVML cannot tell the GPUs' compute capability: training in 16-mixed, which "
                "every CUDA GPU runs; set trainer.precision=bf16-mixed on Ampere or later GPUs"
            )
            return "16-mixed"
        native = min(capabilities) >= NATIVE_BF16_CUDA_CAPABILITY
        return "bf16-mixed" if native else "16-mixed"
    return auto_cpu_precision(resumed)


def on_gpus(accelerator: str) -> bool:
    """Whether a run on `accelerator` trains on GPUs, told without initialising CUDA."""
    # NVML counts the GPUs first; torch falls back to the CUDA driver only if NVML fails.
    return accelerator in ("gpu", "cuda", "auto") and torch.cuda.device_count() > 0
