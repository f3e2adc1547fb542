import torch

from transformer_nmt.data.batching import collate
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID
from transformer_nmt.model import Transformer
from transformer_nmt.training.loss import label_smoothed_nll
from transformer_nmt.training.precision import auto_precision, cpu_has_native_bf16


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


def test_bf16_autocast_training_step_stays_within_tolerance_of_fp32():
    """bf16-mixed as Lightning runs it (autocast around forward and loss, fp32 weights): the
    loss within 1% and the gradients within 5% (relative norm) of fp32's; the loss itself fp32."""
    torch.manual_seed(0)
    model = Transformer(vocab_size=64, pad_id=PAD_ID, N=2, d_model=32, d_ff=64, h=4, dropout=0.0)
    g = torch.Generator().manual_seed(1)
    words = lambda n: torch.randint(4, 64, (n,), generator=g).tolist()  # noqa: E731
    batch = collate([{"src": words(n) + [EOS_ID], "tgt": words(n + 1)} for n in (5, 9, 7)], PAD_ID)
    index = batch["tgt_index"]
    target = batch["tgt_out"].flatten()[index]

    def step(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        model.zero_grad()
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss, _ = label_smoothed_nll(model(batch["src"], batch["tgt_in"], index), target, 0.1)
        loss.backward()
        return loss.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])

    loss32, grad32 = step(torch.float32)
    loss16, grad16 = step(torch.bfloat16)
    assert loss16.dtype == torch.float32
    torch.testing.assert_close(loss16, loss32, rtol=1e-2, atol=0)
    assert (grad16 - grad32).norm() / grad32.norm() < 0.05
