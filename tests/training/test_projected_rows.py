import lightning as L
import pytest
import torch

from helpers.ddp import batch, sentences, tiny_module


def loss_and_projected_rows(precision: str) -> tuple[list[torch.Tensor], int, list[int]]:
    """The training loss's (loss, NLL) and gradients on one batch, outside autocast (fp32), with
    a trainer of `precision` attached; its token count, and the row counts the projection saw."""
    module = tiny_module()
    module.trainer = L.Trainer(accelerator="cpu", precision=precision, logger=False)
    rows = []
    module.model.generator.register_forward_hook(lambda _, args, out: rows.append(len(args[0])))
    pairs = batch(*sentences([3, 5, 6]))  # 3 + 5 + 6 targets and their EOS: 17 rows
    loss_sum, nll_sum, num_tokens = module._loss(pairs)
    grads = torch.autograd.grad(loss_sum, list(module.model.parameters()))
    return [loss_sum, nll_sum, *grads], num_tokens, rows


@pytest.mark.parametrize("precision, projected", [("32-true", 17), ("bf16-mixed", 24)])
def test_16_bit_training_projects_a_multiple_of_8_rows_and_the_same_loss(precision, projected):
    reference, tokens, _ = loss_and_projected_rows("32-true")
    values, num_tokens, rows = loss_and_projected_rows(precision)
    assert rows == [projected] and num_tokens == tokens == 17
    for value, expected in zip(values, reference, strict=True):
        torch.testing.assert_close(value, expected)  # the extra rows' gradient is 0
