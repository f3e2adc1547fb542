import ctypes
import subprocess
import sys

import pytest
import torch

from transformer_nmt.data.batching import collate
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID
from transformer_nmt.model import Transformer
from transformer_nmt.training.plan import precision
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.precision import (
    AUTO_CPU_PRECISION_ENV,
    auto_cpu_precision,
    auto_precision,
    cpu_bf16_matmul_speedup,
    cpu_has_native_bf16,
    resolve_precision,
)
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.step.loss import label_smoothed_nll

# What initialises CUDA in this process, and so stops the fork launchers from starting.
CUDA_INITIALISERS = [
    (torch.cuda, "is_bf16_supported"),
    (torch.cuda, "get_device_capability"),
    (torch.cuda, "get_device_properties"),
    (torch.cuda, "current_device"),
    (torch.cuda, "init"),
    (torch.cuda, "_lazy_init"),
    (torch._C, "_cuda_getDeviceCount"),  # the driver's cuInit, if NVML could not count
]


class FakeNVML:
    """libnvidia-ml.so.1 as ctypes presents it, for GPUs of the given compute capabilities.

    Outputs go through ctypes.byref arguments, as from the C library: `ref._obj` is the value.
    """

    def __init__(self, capabilities: list[tuple[int, int]]):
        self.capabilities = capabilities

    def nvmlInit(self) -> int:
        return 0

    def nvmlDeviceGetCount_v2(self, count) -> int:
        count._obj.value = len(self.capabilities)
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index: int, handle) -> int:
        handle._obj.value = 1000 + index
        return 0

    def nvmlDeviceGetCudaComputeCapability(self, handle: ctypes.c_void_p, major, minor) -> int:
        major._obj.value, minor._obj.value = self.capabilities[handle.value - 1000]
        return 0


class OldDriverNVML(FakeNVML):
    """Before CUDA 11, NVML lacked the compute capability query: ctypes finds no such symbol."""

    @property
    def nvmlDeviceGetCudaComputeCapability(self):
        raise AttributeError("nvmlDeviceGetCudaComputeCapability")


@pytest.fixture
def simulate_gpus(monkeypatch):
    """Makes this CPU-only torch see GPUs of the given capabilities through a fake NVML, as a
    CUDA build sees real ones; everything that would initialise CUDA raises instead."""

    def simulate(capabilities: list[tuple[int, int]], nvml: type[FakeNVML] = FakeNVML) -> None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.setattr(torch.cuda, "_is_compiled", lambda: True)
        # As in a fresh process, also where earlier tests on a GPU machine initialised CUDA.
        monkeypatch.setattr(torch.cuda, "_initialized", False)
        monkeypatch.setattr(torch.cuda, "_cached_device_count", None)

        def load(name: str) -> FakeNVML:
            assert name == "libnvidia-ml.so.1"
            return nvml(capabilities)

        monkeypatch.setattr(ctypes, "CDLL", load)
        for module, name in CUDA_INITIALISERS:
            monkeypatch.setattr(module, name, initialises_cuda(name), raising=False)

    return simulate


def initialises_cuda(name: str):
    def forbidden(*args, **kwargs):
        raise AssertionError(f"{name} would initialise CUDA before the fork launchers start")

    return forbidden


def test_cpu_flags_decide(tmp_path):
    with_amx = tmp_path / "amx"
    with_amx.write_text("flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile\n")
    avx2_only = tmp_path / "avx2"
    avx2_only.write_text("flags\t\t: fpu avx avx2 fma\n")
    assert cpu_has_native_bf16(with_amx)
    assert not cpu_has_native_bf16(avx2_only)
    assert not cpu_has_native_bf16(tmp_path / "missing")


@pytest.fixture
def undecided(monkeypatch):
    """A process that has not chosen its CPU precision yet (the choice is kept in os.environ)."""
    monkeypatch.setenv(AUTO_CPU_PRECISION_ENV, "undecided")
    monkeypatch.delenv(AUTO_CPU_PRECISION_ENV)  # restored to its state before, at teardown


@pytest.fixture
def cpu(monkeypatch, undecided):
    """A CPU with or without native bf16, whose bf16 matmuls run `speedup` times as fast."""

    def simulate(native: bool, speedup: float | None = None) -> None:
        monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)

        def probe() -> float:
            assert speedup is not None, "emulated bf16 needs no measuring"
            return speedup

        monkeypatch.setattr(precision, "cpu_bf16_matmul_speedup", probe)

    return simulate


@pytest.mark.parametrize(
    ("native", "speedup", "expected"),
    [
        (False, None, "32-true"),  # AVX2 only: bf16 emulated, never measured
        (True, 4.0, "bf16-mixed"),  # Zen 5 EPYC with AVX512-BF16
        (True, 0.55, "32-true"),  # Xeon without AMX: native bf16, yet slower than fp32
    ],
)
def test_cpus_train_in_bf16_only_where_it_is_native_and_measured_faster(
    cpu, native, speedup, expected
):
    cpu(native, speedup)
    assert auto_precision("cpu") == expected


def test_the_cpu_choice_is_made_once_and_inherited_by_the_ranks(cpu):
    cpu(True, 4.0)
    assert auto_precision("cpu") == "bf16-mixed"
    cpu(True, 0.55)  # a later probe that would disagree, as one on a busy machine might
    assert auto_precision("cpu") == "bf16-mixed"
    code = "import transformer_nmt.training.plan.precision as p; print(p.auto_cpu_precision())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert child.stdout.strip() == "bf16-mixed", child.stderr


def test_the_matmul_probe_measures_this_cpu_and_gives_back_its_threads_and_random_state(
    undecided,
):
    threads, random_state = torch.get_num_threads(), torch.get_rng_state()
    speedup = cpu_bf16_matmul_speedup(n=128, pairs=2)
    assert 0 < speedup < 100
    assert torch.get_num_threads() == threads
    # The seed's dropout masks are the same whether precision=auto measured or not.
    assert torch.equal(torch.get_rng_state(), random_state)
    if not cpu_has_native_bf16():  # emulated bf16 (~30x slower steps) can never win
        assert speedup < precision.BF16_MIN_MATMUL_SPEEDUP
        assert auto_cpu_precision() == "32-true"


@pytest.mark.parametrize(
    ("saved", "native", "expected"),
    [
        ({"device": "cpu", "precision": "32-true"}, True, "32-true"),
        ({"device": "cpu", "precision": "bf16-mixed"}, True, "bf16-mixed"),
        ({"device": "cpu", "precision": "bf16-mixed"}, False, "32-true"),  # moved to an AVX2 CPU
    ],
)
def test_a_run_resumed_on_a_cpu_trains_on_in_its_checkpoints_precision_without_timing(
    cpu, tmp_path, saved, native, expected
):
    cpu(native)  # no speedup: a timing would fail the test
    checkpoint = tmp_path / "last.ckpt"
    torch.save({"precision": saved}, checkpoint)
    resumed = ResumePoint(checkpoint)
    assert resolve_precision("auto", "cpu", resumed) == expected
    assert resolve_precision("32-true", "cpu", resumed) == "32-true"  # the user's word


@pytest.mark.parametrize(
    "saved",
    [
        {},  # saved before checkpoints kept their precision
        {"precision": {"device": "cuda", "precision": "16-mixed"}},  # moved off a GPU
    ],
)
def test_a_run_resumed_from_elsewhere_times_this_cpu(cpu, tmp_path, saved):
    cpu(True, 4.0)
    checkpoint = tmp_path / "last.ckpt"
    torch.save(saved, checkpoint)
    assert resolve_precision("auto", "cpu", ResumePoint(checkpoint)) == "bf16-mixed"


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [
        ([(8, 0)], "bf16-mixed"),  # A100
        ([(9, 0), (9, 0)], "bf16-mixed"),  # 2 H100
        ([(7, 0)], "16-mixed"),  # V100: bf16 only emulated
        ([(7, 5)], "16-mixed"),  # T4
        ([(8, 6), (7, 5)], "16-mixed"),  # mixed: the oldest decides
    ],
)
def test_gpus_get_native_bf16_or_else_fp16_without_initialising_cuda(
    simulate_gpus, capabilities, expected
):
    simulate_gpus(capabilities)
    for accelerator in ("auto", "gpu", "cuda"):
        assert auto_precision(accelerator) == expected
    assert auto_precision("cpu") == auto_cpu_precision()
    assert not torch.cuda.is_initialized()


def test_visible_devices_decide(simulate_gpus, monkeypatch):
    simulate_gpus([(7, 5), (8, 0)])
    assert auto_precision("gpu") == "16-mixed"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert auto_precision("gpu") == "bf16-mixed"


def test_gpus_of_unknown_capability_get_fp16(simulate_gpus):
    simulate_gpus([(8, 0)], nvml=OldDriverNVML)
    assert auto_precision("gpu") == "16-mixed"


def trained_on_gpus(tmp_path, precision: str) -> ResumePoint:
    """A checkpoint trained on GPUs in `precision`, as the run resumed from it sees it."""
    checkpoint = tmp_path / "last.ckpt"
    torch.save({"precision": {"device": "cuda", "precision": precision}}, checkpoint)
    return ResumePoint(checkpoint)


@pytest.mark.parametrize(
    ("trained", "capabilities"),
    [
        ("bf16-mixed", [(9, 0)]),  # as it trained
        ("16-mixed", [(7, 0)]),
        ("16-mixed", [(8, 0)]),  # requeued onto newer GPUs: fp16 runs natively there too
        ("32-true", [(8, 0)]),
    ],
)
def test_a_run_resumed_on_gpus_trains_on_in_its_checkpoints_precision(
    simulate_gpus, tmp_path, trained, capabilities
):
    simulate_gpus(capabilities)
    assert resolve_precision("auto", "gpu", trained_on_gpus(tmp_path, trained)) == trained


def test_a_bf16_run_requeued_onto_gpus_without_native_bf16_is_refused_naming_both(
    simulate_gpus, tmp_path
):
    simulate_gpus([(7, 0)])  # V100
    resumed = trained_on_gpus(tmp_path, "bf16-mixed")
    with pytest.raises(ConfigError) as refused:
        resolve_precision("auto", "gpu", resumed)
    said = str(refused.value)
    assert said.startswith(f"ckpt_path={resumed.path} trained in bf16-mixed")
    assert "trainer.precision=bf16-mixed to go on as it trained" in said
    assert "trainer.precision=16-mixed to switch" in said
    assert resolve_precision("16-mixed", "gpu", resumed) == "16-mixed"  # the user's word


@pytest.mark.slow
def test_importing_and_resolving_leave_cuda_uninitialised():
    """In a fresh interpreter, since tests on a GPU machine initialise CUDA in this one."""
    code = (
        "import torch; import transformer_nmt.training.plan.precision as p; "
        "p.resolve_precision('auto', 'auto');"
        "print(torch.cuda.is_initialized())"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("dtype", "grad_tolerance"), [(torch.bfloat16, 0.05), (torch.float16, 0.01)], ids=str
)
def test_mixed_precision_training_step_stays_within_tolerance_of_fp32(
    dtype, grad_tolerance, device
):
    """bf16-mixed and 16-mixed as Lightning runs them (autocast around forward and loss, fp32
    weights; for fp16 its GradScaler, 2^16 times the per-token loss): the loss within 1% and the
    unscaled gradients within `grad_tolerance` (relative norm) of fp32's; the loss itself fp32."""
    torch.manual_seed(0)
    model = Transformer(vocab_size=64, pad_id=PAD_ID, N=2, d_model=32, d_ff=64, h=4, dropout=0.0)
    model.to(device)
    g = torch.Generator().manual_seed(1)
    words = lambda n: torch.randint(4, 64, (n,), generator=g).tolist()  # noqa: E731
    batch = collate([{"src": words(n) + [EOS_ID], "tgt": words(n + 1)} for n in (5, 9, 7)], PAD_ID)
    src, tgt_in, index = (batch[k].to(device) for k in ("src", "tgt_in", "tgt_index"))
    target = batch["tgt_out"].flatten().to(device)[index]
    optimizer = torch.optim.SGD(model.parameters())  # only for the scaler's bookkeeping
    scaler = torch.amp.GradScaler(device.type)  # as Lightning's, at its initial scale 2^16

    def step(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        model.zero_grad()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss, _ = label_smoothed_nll(model(src, tgt_in, index), target, 0.1)
            loss = loss / target.numel()
        if dtype == torch.float16:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            assert not any(scaler._found_inf_per_device(optimizer).values())  # no step skipped
        else:
            loss.backward()
        return loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])

    loss32, grad32 = step(torch.float32)
    loss16, grad16 = step(dtype)
    assert loss16.dtype == torch.float32
    torch.testing.assert_close(loss16, loss32, rtol=1e-2, atol=0)
    assert (grad16 - grad32).norm() / grad32.norm() < grad_tolerance
