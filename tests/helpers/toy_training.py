"""The toy task as one batch of word ids and a plain training loop: a model learns it in seconds.

No BPE to train: each of the toy task's 40 number words is one id, within the model tests' tiny
vocabulary, and batches are framed as training frames them.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_nmt.data.framing import decoder_input, decoder_target, pad_batch, source_ids
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.data.toy import ENGLISH, GERMAN, ToyCorpus

FIRST_WORD = 3  # ids below are specials: pad 0, BOS 1, EOS 2
WORD_IDS = {word: FIRST_WORD + i for i, word in enumerate(ENGLISH + GERMAN)}
VOCAB_SIZE = FIRST_WORD + len(WORD_IDS)


def toy_batch(num_pairs: int = 64, seed: int = 0) -> dict[str, Tensor]:
    """Padded "src", "tgt_in" and "tgt_out" (B, L) of `num_pairs` English -> German toy pairs."""
    pairs = ToyCorpus(num_train=num_pairs, num_val=0, num_test=0, seed=seed).read(
        "train", "en", "de"
    )
    ids = [([WORD_IDS[w] for w in s.split()], [WORD_IDS[w] for w in t.split()]) for s, t in pairs]
    return {
        "src": pad_batch([source_ids(s) for s, _ in ids]),
        "tgt_in": pad_batch([decoder_input(t) for _, t in ids]),
        "tgt_out": pad_batch([decoder_target(t) for _, t in ids]),
    }


def train_steps(model: nn.Module, batch: dict[str, Tensor], steps: int, lr: float) -> list[float]:
    """Full-batch Adam steps on the cross-entropy of real target positions; each step's loss."""
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    real = batch["tgt_out"] != PAD_ID
    losses = []
    for _ in range(steps):
        logits = model(batch["src"], batch["tgt_in"])  # (B, T, V)
        loss = F.cross_entropy(logits[real], batch["tgt_out"][real])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses
