"""experiments/common/peers.py: every peer builds, trains a step and decodes to the same cap."""

import numpy as np
import pytest
import torch

from experiments.common import peers
from experiments.common.batches import training_batches
from experiments.common.training import make_optimizer, train_step
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID

# nn.Transformer's encoder says on every inference call that its nested tensors are a prototype.
pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
TINY = peers.Size(N=1, d_model=16, d_ff=32, h=2, vocab=40)
# ours-compiled is ours behind torch.compile, whose first step compiles for minutes on a CPU.
TRAINING = [name for name in peers.PEERS if name != "ours-compiled"]
DECODING = [name for name in peers.PEERS if not peers.PEERS[name].training_only]


def build(name: str):
    if package := peers.missing(name):
        pytest.skip(f"{package} is not installed (a benchmark-only package)")
    return peers.build(name, TINY)


@pytest.mark.parametrize("name", TRAINING)
def test_a_training_step_changes_every_weight_that_the_loss_reaches(name):
    peer = build(name)
    rng = np.random.default_rng(0)
    [batch] = training_batches(rng.integers(3, 9, 8), rng.integers(3, 9, 8), TINY.vocab, count=1)
    before = [p.detach().clone() for p in peer.model.parameters()]
    loss = peer.loss(batch)
    assert loss.ndim == 0 and torch.isfinite(loss) and loss > 0
    train_step(peer, make_optimizer(peer.model.train()), batch, "fp32")
    changed = [not torch.equal(a, b) for a, b in zip(before, peer.model.parameters(), strict=True)]
    assert sum(changed) >= len(changed) - 2  # all but, at most, positions never looked up


@pytest.mark.parametrize("name", DECODING)
def test_each_decoding_peer_decodes_every_sentence_to_its_cap(name):
    peer = build(name)
    peer.model.eval()
    src = torch.randint(4, TINY.vocab, (3, 5))
    src[:, -1] = EOS_ID  # three sources of 5 tokens, EOS included
    assert (src != PAD_ID).all()
    cap = 3 * (5 + 2)  # EOS is never predicted: each output runs to source length + max_len_b
    with torch.no_grad():
        assert peer.greedy(src, max_len_b=2) == cap
        assert peer.beam(src, max_len_b=2) == cap


def test_a_preset_with_a_stack_of_its_own_is_refused_by_name():
    with pytest.raises(ValueError, match="model=student_6_1 sets N_enc, N_dec: the peers take"):
        peers.model_size("student_6_1", vocab=40)
