import pytest
import torch
import torch.nn.functional as F

from transformer_nmt.data.batching import collate
from transformer_nmt.model import Transformer
from transformer_nmt.training.step import loss as loss_module
from transformer_nmt.training.step.loss import label_smoothed_nll, perplexity

PAD = 0


def _batch(seed: int = 0, device: torch.device | str = "cpu"):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 5, 11, generator=g)
    target = torch.randint(1, 11, (3, 5), generator=g)
    target[0, 3:] = PAD
    target[2, 1:] = PAD
    return logits.to(device), target.to(device)


def test_equals_pytorch_label_smoothing_ignoring_pad(device):
    logits, target = _batch(device=device)
    real = target != PAD
    loss, nll = label_smoothed_nll(logits[real], target[real], epsilon=0.1)
    ref = F.cross_entropy(
        logits.view(-1, 11), target.view(-1), ignore_index=PAD, label_smoothing=0.1,
        reduction="sum",
    )  # fmt: skip
    ref_nll = F.cross_entropy(
        logits.view(-1, 11), target.view(-1), ignore_index=PAD, reduction="sum"
    )
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(nll, ref_nll)


def test_projecting_only_real_positions_equals_the_full_loss_and_its_gradients():
    """The training path (projection and softmax at collate's non-pad index) against the plain
    one (logits everywhere, cross-entropy ignoring padding): same loss, same gradients."""
    examples = [
        {"src": [5, 6, 7, 2], "tgt": [8, 9, 10, 11, 12]},
        {"src": [5, 2], "tgt": [13]},
        {"src": [9, 8, 2], "tgt": [14, 15]},
    ]
    batch = collate(examples, pad_id=PAD)
    torch.manual_seed(0)
    model = Transformer(vocab_size=20, pad_id=PAD, N=1, d_model=16, d_ff=32, h=2, dropout=0.0)
    index = batch["tgt_index"]
    target = batch["tgt_out"].flatten()[index]
    fast, _ = label_smoothed_nll(model(batch["src"], batch["tgt_in"], index), target, 0.1)
    fast_grads = torch.autograd.grad(fast, list(model.parameters()))
    full = F.cross_entropy(
        model(batch["src"], batch["tgt_in"]).flatten(0, 1), batch["tgt_out"].flatten(),
        ignore_index=PAD, label_smoothing=0.1, reduction="sum",
    )  # fmt: skip
    full_grads = torch.autograd.grad(full, list(model.parameters()))
    torch.testing.assert_close(fast, full)
    for a, b in zip(fast_grads, full_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_gradients_equal_autograd_through_pytorch_cross_entropy(device):
    logits, target = _batch(3, device)
    real = target != PAD
    logits, target = logits[real], target[real]
    ours = logits.clone().requires_grad_()
    loss, nll = label_smoothed_nll(ours, target, 0.1)
    (2.0 * loss + 0.5 * nll).backward()  # both outputs carry gradient, unequally
    ref = logits.clone().requires_grad_()
    (
        2.0 * F.cross_entropy(ref, target, label_smoothing=0.1, reduction="sum")
        + 0.5 * F.cross_entropy(ref, target, reduction="sum")
    ).backward()
    torch.testing.assert_close(ours.grad, ref.grad)


# 11 classes: blocks of one row, of two rows (the last block shorter: 10 rows), of all rows.
@pytest.mark.parametrize("block_elements", [11, 30, 2**18])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_blocks_of_rows_give_the_loss_and_gradient_of_cross_entropy(
    monkeypatch, block_elements, dtype
):
    monkeypatch.setattr(loss_module, "CPU_BLOCK_ELEMENTS", block_elements)
    logits, target = _batch(7)
    logits, target = logits.flatten(0, 1).to(dtype), target.flatten()
    ours = logits.clone().requires_grad_()
    loss, nll = label_smoothed_nll(ours, target, 0.1)
    (2.0 * loss + 0.5 * nll).backward()
    ref = logits.float().requires_grad_()
    ref_loss = F.cross_entropy(ref, target, label_smoothing=0.1, reduction="sum")
    ref_nll = F.cross_entropy(ref, target, reduction="sum")
    (2.0 * ref_loss + 0.5 * ref_nll).backward()
    torch.testing.assert_close((loss, nll), (ref_loss, ref_nll))
    tolerance = {"atol": 1e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(ours.grad.float(), ref.grad, **tolerance)


@pytest.mark.parametrize("block_elements", [11, 2**18])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rows_past_the_targets_are_ignored(monkeypatch, block_elements, dtype):
    monkeypatch.setattr(loss_module, "CPU_BLOCK_ELEMENTS", block_elements)
    logits, target = _batch(5)
    logits, target = logits.flatten(0, 1).to(dtype), target.flatten()[:8]  # 15 rows, 8 targets
    results = []
    for scores in (logits.clone(), logits[:8].clone()):
        scores.requires_grad_()
        loss, nll = label_smoothed_nll(scores, target, 0.1)
        (loss + nll).backward()
        results.append((loss, nll, scores.grad))
    (loss, nll, grad), (ref_loss, ref_nll, ref_grad) = results
    torch.testing.assert_close((loss, nll, grad[:8]), (ref_loss, ref_nll, ref_grad), rtol=0, atol=0)
    assert grad.shape == (15, 11) and not grad[8:].any()


def test_bf16_logits_are_scored_in_fp32_and_get_a_bf16_gradient():
    logits, target = _batch(4)
    logits = logits.flatten(0, 1).bfloat16().requires_grad_()
    ref = logits.detach().float().requires_grad_()  # before backward turns them into the grad
    loss, _ = label_smoothed_nll(logits, target.flatten(), 0.1)
    loss.backward()
    F.cross_entropy(ref, target.flatten(), label_smoothing=0.1, reduction="sum").backward()
    assert loss.dtype == torch.float32 and logits.grad.dtype == torch.bfloat16
    torch.testing.assert_close(logits.grad.float(), ref.grad, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_logits_become_their_own_gradient(dtype):
    """No second (N, V) tensor: at base size in bf16 the gradient would be another ~50 MB."""
    states = torch.randn(40, 16, dtype=dtype, requires_grad=True)
    logits = states @ torch.randn(16, 300, dtype=dtype)  # not a leaf, as the projection's output
    grads = []
    logits.register_hook(grads.append)
    loss, _ = label_smoothed_nll(logits, torch.randint(0, 300, (40,)), 0.1)
    loss.backward()
    assert grads[0].data_ptr() == logits.data_ptr()
    assert states.grad is not None


def test_fp16_logits_with_a_scaled_loss_get_the_float64_gradient(device):
    """16-mixed: fp16 logits, the per-token loss times GradScaler's initial 2^16. Unscaled, the
    fp16 gradient is the float64 one of F.cross_entropy within fp16's precision."""
    g = torch.Generator().manual_seed(5)
    vocab, tokens, scale = 1000, 64, 2.0**16
    logits64 = (4 * torch.randn(tokens, vocab, generator=g, dtype=torch.float64)).to(device)
    target = torch.randint(1, vocab, (tokens,), generator=g).to(device)
    logits = logits64.half().requires_grad_()
    ref = logits.detach().double().requires_grad_()  # the same fp16 values, in float64
    loss, _ = label_smoothed_nll(logits, target, 0.1)
    (loss / tokens * scale).backward()
    F.cross_entropy(ref, target, label_smoothing=0.1).backward()
    assert logits.grad.dtype == torch.float16 and logits.grad.isfinite().all()
    torch.testing.assert_close(logits.grad.double() / scale, ref.grad, atol=1e-7, rtol=2e-3)


def test_an_fp16_gradient_overflow_reaches_the_grad_scaler_as_inf():
    """GradScaler skips a step and lowers its scale only if it sees inf: no saturation here."""
    logits, target = _batch(6)
    logits = logits.flatten(0, 1).half().requires_grad_()
    loss, _ = label_smoothed_nll(logits, target.flatten(), 0.1)
    (loss * 2.0**20).backward()  # gradients of about 2^20 exceed fp16's 65504
    assert logits.grad.isinf().any()


def test_bf16_logits_are_scored_in_fp32():
    logits, target = _batch(2)
    loss, nll = label_smoothed_nll(logits.flatten(0, 1).bfloat16(), target.flatten(), 0.1)
    assert loss.dtype == nll.dtype == torch.float32


def test_perplexity_of_uniform_prediction_is_vocabulary_size():
    logits = torch.zeros(8, 7)
    target = torch.ones(8, dtype=torch.long)
    _, nll = label_smoothed_nll(logits, target, 0.0)
    torch.testing.assert_close(perplexity(nll, 8), torch.tensor(7.0))
