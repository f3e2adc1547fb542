import torch
import torch.nn.functional as F

from transformer_nmt.loss import label_smoothed_nll, perplexity

PAD = 0


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 5, 11, generator=g)
    target = torch.randint(1, 11, (3, 5), generator=g)
    target[0, 3:] = PAD
    target[2, 1:] = PAD
    return logits, target


def test_equals_pytorch_label_smoothing_ignoring_pad():
    logits, target = _batch()
    loss, nll, n = label_smoothed_nll(logits, target, epsilon=0.1, pad_id=PAD)
    ref = F.cross_entropy(
        logits.view(-1, 11),
        target.view(-1),
        ignore_index=PAD,
        label_smoothing=0.1,
        reduction="sum",
    )
    ref_nll = F.cross_entropy(
        logits.view(-1, 11), target.view(-1), ignore_index=PAD, reduction="sum"
    )
    assert n == (target != PAD).sum()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(nll, ref_nll)


def test_padding_contributes_nothing():
    logits, target = _batch(1)
    changed = logits.clone()
    changed[target == PAD] = 1e4  # wild scores where there is no target
    assert torch.equal(
        torch.stack(label_smoothed_nll(logits, target, 0.1, PAD)[:2]),
        torch.stack(label_smoothed_nll(changed, target, 0.1, PAD)[:2]),
    )


def test_bf16_logits_are_scored_in_fp32():
    logits, target = _batch(2)
    loss, _, _ = label_smoothed_nll(logits.bfloat16(), target, 0.1, PAD)
    assert loss.dtype == torch.float32


def test_perplexity_of_uniform_prediction_is_vocabulary_size():
    logits = torch.zeros(2, 4, 7)
    target = torch.ones(2, 4, dtype=torch.long)
    _, nll, n = label_smoothed_nll(logits, target, 0.0, PAD)
    torch.testing.assert_close(perplexity(nll, n), torch.tensor(7.0))
