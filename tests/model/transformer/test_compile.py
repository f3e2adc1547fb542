"""`torch.compile` of the training forward: as eager, one compilation for every shape."""

import pytest
import torch
from torch._dynamo.utils import counters

from transformer_nmt.data.batching import collate
from transformer_nmt.model import Transformer
from transformer_nmt.training.step.loss import label_smoothed_nll


def bucket(batch_size: int, src_len: int, tgt_len: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    words = lambda n: torch.randint(3, 50, (n,), generator=g).tolist()  # noqa: E731
    return collate(
        [{"src": words(src_len - i % 3), "tgt": words(tgt_len - i % 2)} for i in range(batch_size)],
        pad_id=0,
    )


def loss_and_grads(model: Transformer, batch: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    index = batch["tgt_index"]
    logits = model(batch["src"], batch["tgt_in"], index)
    loss, _ = label_smoothed_nll(logits, batch["tgt_out"].flatten()[index], 0.1)
    return loss, torch.autograd.grad(loss, list(model.parameters()))


@pytest.mark.slow  # the first compilation takes tens of seconds on a small CPU
def test_compiled_equals_eager_and_compiles_once_for_every_bucket_shape():
    torch.manual_seed(0)
    eager = Transformer(vocab_size=50, pad_id=0, N=1, d_model=32, d_ff=64, h=4, dropout=0.0)
    compiled = Transformer.from_config(eager.config)
    compiled.load_state_dict(eager.state_dict())
    compiled.compile(dynamic=True)
    torch._dynamo.reset()
    counters.clear()
    for shape in [(3, 9, 13), (6, 17, 22), (2, 30, 27), (5, 4, 6)]:
        batch = bucket(*shape, seed=sum(shape))
        loss, grads = loss_and_grads(compiled, batch)
        ref_loss, ref_grads = loss_and_grads(eager, batch)
        torch.testing.assert_close(loss, ref_loss, atol=1e-4, rtol=1e-5)
        for got, want in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert counters["stats"]["unique_graphs"] == 1  # no recompilation on new shapes
