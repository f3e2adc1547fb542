import math

import lightning as L
import pytest
import torch
import torch.nn.functional as F

from helpers.ddp import batch, sentences, tiny_module
from helpers.hydra_compose import compose_train
from transformer_nmt.model import Transformer
from transformer_nmt.train import train
from transformer_nmt.training.step import loss as loss_module
from transformer_nmt.training.step.loss import label_smoothed_nll
from transformer_nmt.training.step.module import real_target_logits
from transformer_nmt.training.step.rdrop import doubled, symmetric_kl


def reference_kl(p_logits, q_logits):
    log_p, log_q = F.log_softmax(p_logits, -1), F.log_softmax(q_logits, -1)
    p_q = F.kl_div(log_q, log_p, reduction="sum", log_target=True)  # KL(p||q)
    q_p = F.kl_div(log_p, log_q, reduction="sum", log_target=True)  # KL(q||p)
    return (p_q + q_p) / 2


def test_symmetric_kl_equals_torch_kl_div_both_ways_and_ignores_rows_after_the_pairs():
    logits = torch.randn(7, 11, generator=torch.Generator().manual_seed(0))  # 3 pairs, 1 extra
    torch.testing.assert_close(symmetric_kl(logits, 3), reference_kl(logits[:3], logits[3:6]))
    assert symmetric_kl(torch.cat([logits[:3], logits[:3], logits[6:]]), 3) == 0


# 11 classes, the KL's blocks a quarter of the loss's: one row, two (the last shorter), all rows.
@pytest.mark.parametrize("block_elements", [44, 88, 2**18])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loss_plus_kl_has_the_gradient_of_the_plain_autograd_reference(
    monkeypatch, block_elements, dtype
):
    """The label-smoothed loss's backward overwrites the logits with their gradient: the KL term
    beside it must still get its own gradient right."""
    monkeypatch.setattr(loss_module, "CPU_BLOCK_ELEMENTS", block_elements)
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(7, 11, generator=g).to(dtype)
    target = torch.randint(0, 11, (6,), generator=g)
    leaf = logits.clone().requires_grad_()
    loss, _ = label_smoothed_nll(leaf * 1, target, 0.1)
    kl = symmetric_kl(leaf * 1, 3)
    (grad,) = torch.autograd.grad(loss + 5 * kl, leaf)

    ref_leaf = logits.float().requires_grad_()
    rows = ref_leaf[:6]
    ref = F.cross_entropy(rows, target, label_smoothing=0.1, reduction="sum")
    ref_kl = reference_kl(rows[:3], rows[3:])
    (ref_grad,) = torch.autograd.grad(ref + 5 * ref_kl, ref_leaf)
    tolerance = {"atol": 2e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(kl, ref_kl)
    assert grad.dtype == dtype
    torch.testing.assert_close(grad.float(), ref_grad, **tolerance)
    assert grad[6].abs().sum() == 0


def test_the_doubled_batch_scores_each_sentence_twice_at_the_same_rows():
    pairs = batch(*sentences([3, 5, 6]))
    torch.manual_seed(0)
    model = Transformer(vocab_size=48, pad_id=0, N=1, d_model=16, d_ff=32, h=2, dropout=0.0)
    once, target = real_target_logits(model, pairs)
    twice, targets = real_target_logits(model, doubled(pairs))
    n = target.numel()
    assert torch.equal(targets, torch.cat([target, target]))
    torch.testing.assert_close(twice[:n], once)
    torch.testing.assert_close(twice[n:], once)


def test_without_dropout_r_drop_is_the_plain_loss_counted_twice():
    """Both passes agree, so the KL is 0: the per-token loss and its gradients are unchanged."""
    module = tiny_module()  # dropout 0
    module.trainer = L.Trainer(accelerator="cpu", logger=False)
    pairs = batch(*sentences([3, 5, 6]))
    plain, plain_nll, tokens = module._loss(pairs)
    rdrop, rdrop_nll, twice = module._loss(pairs, rdrop_alpha=5.0)
    assert twice == 2 * tokens
    torch.testing.assert_close(rdrop / twice, plain / tokens)
    torch.testing.assert_close(rdrop_nll / twice, plain_nll / tokens)
    params = list(module.model.parameters())
    for a, b in zip(
        torch.autograd.grad(plain / tokens, params),
        torch.autograd.grad(rdrop / twice, params),
        strict=True,
    ):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_with_dropout_the_two_passes_draw_different_masks():
    torch.manual_seed(0)
    model = Transformer(vocab_size=48, pad_id=0, N=1, d_model=16, d_ff=32, h=2, dropout=0.3)
    logits, target = real_target_logits(model.train(), doubled(batch(*sentences([3, 5, 6]))))
    assert symmetric_kl(logits, target.numel() // 2) > 1e-3


def test_train_py_trains_with_r_drop_and_records_its_weight(tmp_path):
    overrides = ["experiment=toy", "logger=none", "module.rdrop_alpha=2", "trainer.max_epochs=1"]
    overrides.append("~callbacks.attention_maps")
    metrics = train(compose_train(tmp_path, overrides))
    assert math.isfinite(metrics["train/loss"])
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["hyper_parameters"]["rdrop_alpha"] == 2
