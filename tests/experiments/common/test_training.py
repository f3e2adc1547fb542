"""experiments/common/training.py: which steps time_training times, and which it runs first."""

import pytest

from experiments.common import peers
from experiments.common.batches import bucketed_batches
from experiments.common.training import time_training


class Recording:
    """A peer that records the batches its loss is asked for."""

    def __init__(self, peer):
        self.peer, self.model, self.seen = peer, peer.model, []

    def loss(self, batch: dict):
        self.seen.append(batch)
        return self.peer.loss(batch)


@pytest.fixture(scope="module")
def batches() -> list[dict]:
    return bucketed_batches(count=3, tokens=100, vocab=40)


@pytest.mark.parametrize("seen_shapes", [False, True])
def test_the_warmup_steps_and_with_seen_shapes_each_timed_batch_once_come_first(
    batches, seen_shapes
):
    peer = Recording(peers.build("ours", peers.Size(N=1, d_model=16, d_ff=32, h=2, vocab=40)))
    assert time_training(peer, batches, warmup=1, precision="fp32", seen_shapes=seen_shapes) > 0
    first, *timed = batches  # one warm-up step, two timed
    assert len(timed) == 2
    untimed = [first, *timed] if seen_shapes else [first]
    assert [id(b) for b in peer.seen] == [id(b) for b in untimed + timed]
    assert peer.model.training
