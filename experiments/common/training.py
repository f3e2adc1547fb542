"""One training step of a peer (forward, loss, backward, the paper's Adam), and its timing."""

import torch
from torch import nn

from experiments.common.timing import seconds


def autocast(precision: str) -> torch.autocast:
    """bf16 autocast on the CPU for "bf16", nothing for "fp32"."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """The paper's Adam (section 5.3); the learning rate does not change the speed."""
    return torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)


def train_step(peer, optimizer: torch.optim.Optimizer, batch: dict, precision: str) -> None:
    with autocast(precision):
        loss = peer.loss(batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def time_training(
    peer, batches: list[dict], warmup: int, precision: str, seen_shapes: bool = False
) -> float:
    """Seconds for training on batches[warmup:], after untimed steps on batches[:warmup].

    seen_shapes: first one untimed step on each timed batch as well, so that no timed step
    meets a new shape (as in a long run's later epochs, where the batch shapes recur).
    """
    peer.model.train()
    optimizer = make_optimizer(peer.model)
    torch.manual_seed(0)  # the same dropout masks for every peer's first step
    for batch in batches[:warmup] + (batches[warmup:] if seen_shapes else []):
        train_step(peer, optimizer, batch, precision)

    def timed() -> None:
        for batch in batches[warmup:]:
            train_step(peer, optimizer, batch, precision)

    return seconds(timed)
