import torch

from transformer_nmt.precision import auto_precision, cpu_has_native_bf16


def test_cpu_flags_decide(tmp_path):
    with_amx = tmp_path / "amx"
    with_amx.write_text("flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile\n")
    avx2_only = tmp_path / "avx2"
    avx2_only.write_text("flags\t\t: fpu avx avx2 fma\n")
    assert cpu_has_native_bf16(with_amx)
    assert not cpu_has_native_bf16(avx2_only)
    assert not cpu_has_native_bf16(tmp_path / "missing")


def test_auto_precision_on_this_machine():
    expected = "bf16-mixed" if cpu_has_native_bf16() else "32-true"
    if not torch.cuda.is_available():
        assert auto_precision("cpu") == expected
        assert auto_precision("auto") == expected
