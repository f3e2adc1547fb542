"""Tiny models and padded batches: every model and search test runs in well under a second.

A test folder's conftest imports the fixtures it uses: one definition for model/ and decoding/.
"""

from collections.abc import Callable

import pytest
import torch
from torch import Tensor, nn

from transformer_nmt.model import RNNAttention, Transformer

VOCAB, PAD, BOS = 50, 0, 1  # the tests' own copies of PAD and BOS must match
FIRST_WORD = 3  # ids below are specials: pad 0, BOS 1, EOS 2
TINY = dict(vocab_size=VOCAB, pad_id=PAD, N=2, d_model=32, d_ff=64, h=4, dropout=0.0)
# The families whose linear layers CPU decoding rewrites (int8, weight layout): the Transformer,
# a 3-1 student of it, and a tiny RNN (tests/model/rnn's sizes).
FAMILIES = ("transformer", "student", "rnn")
RNN = dict(vocab_size=VOCAB, pad_id=PAD, embed_dim=16, hidden_size=24, dropout=0.0)


@pytest.fixture(autouse=True)
def tiny_tensors_on_one_thread(one_thread):
    """Tiny tensors gain nothing from intra-op threads; syncing them would dominate run time."""


@pytest.fixture
def make_model() -> Callable[..., Transformer]:
    """Seeded tiny Transformer in eval mode; keyword arguments override TINY."""

    def make(seed: int = 0, **overrides) -> Transformer:
        torch.manual_seed(seed)
        return Transformer(**{**TINY, **overrides}).eval()

    return make


@pytest.fixture
def make_family(make_model) -> Callable[[str], nn.Module]:
    """A tiny model of one of FAMILIES, in eval mode."""

    def make(family: str) -> nn.Module:
        if family == "rnn":
            return RNNAttention(**RNN).eval()
        return make_model(N_enc=3, N_dec=1, d_ff_dec=16) if family == "student" else make_model()

    return make


@pytest.fixture
def make_tokens() -> Callable[..., Tensor]:
    """Random word ids, right-padded to the longest of `lengths`; BOS first if bos=True."""

    def make(
        lengths: list[int], seed: int = 0, bos: bool = False, device: torch.device | str = "cpu"
    ) -> Tensor:
        g = torch.Generator().manual_seed(seed)
        tokens = torch.randint(FIRST_WORD, VOCAB, (len(lengths), max(lengths)), generator=g)
        for row, length in zip(tokens, lengths, strict=True):
            row[length:] = PAD
        if bos:
            tokens[:, 0] = BOS
        return tokens.to(device)

    return make
