"""Token-budget batches of similar-length pairs (paper section 5.1), padded into tensors."""

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler

from transformer_nmt.data.framing import decoder_input, decoder_target, first_token, pad_batch
from transformer_nmt.data.padding import rounding_multiple


class TokenBatchSampler(Sampler[list[int]]):
    """Yields one rank's lists of example indices whose size stays within a token budget.

    Examples are sorted by length, so a batch wastes little on padding, and cut greedily so that
    `len(batch) * max(longest source, longest target) <= max_tokens`. `collate`'s rounding of
    lengths to a multiple (16-bit precision) comes on top, as in fairseq, so which pairs share a
    batch does not depend on the precision; `rounding_multiple` bounds what it adds. Ties in
    length are broken at random and the batch order is shuffled, both from (seed, epoch). Batch
    sizes depend only on the sorted lengths, so every epoch has the same number of batches.

    Under DDP every rank builds the same batches and takes every `world_size`-th one. The largest
    batches are halved until their count divides by `world_size`, so every rank runs the same
    number of steps (a rank left short would hang the others in a collective) while each example
    is still seen exactly once per epoch: no repeats, which would double-count validation BLEU.
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ):
        """Fix the batch sizes; which examples fill them is drawn per epoch.

        Args:
            src_lengths: tokens per source sequence as the model sees it (EOS included).
            tgt_lengths: tokens per target sequence as the model sees it (BOS or EOS included).
            max_tokens: budget of tokens per side of a batch, padding to the longest included.
            shuffle: randomize ties and batch order per epoch; if False, batches run shortest first.
            seed: with the epoch, seeds the randomness; must be the same on every rank.
            rank: this process's global rank, 0 <= rank < world_size.
            world_size: number of DDP processes sharing the batches.
        """
        super().__init__()
        if not 0 <= rank < world_size:
            raise ValueError(f"rank={rank} must lie in [0, world_size={world_size})")
        self.src_lengths = np.asarray(src_lengths, dtype=np.int64)
        self.tgt_lengths = np.asarray(tgt_lengths, dtype=np.int64)
        if self.src_lengths.shape != self.tgt_lengths.shape:
            raise ValueError(
                f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths"
            )
        self.longest = np.maximum(self.src_lengths, self.tgt_lengths)
        if len(self.longest) and self.longest.max() > max_tokens:
            index = int(self.longest.argmax())
            raise ValueError(
                f"example {index} has {self.longest[index]} tokens, more than "
                f"max_tokens={max_tokens}; filter long examples or raise max_tokens"
            )
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.sizes = _split_to_multiple(greedy_sizes(np.sort(self.longest), max_tokens), world_size)
        self.consumed = 0  # batches of this epoch already yielded by this rank
        self._resume_at = 0

    # Lightning calls `set_epoch` only on `loader.sampler` and `loader.batch_sampler.sampler`.
    @property
    def sampler(self) -> "TokenBatchSampler":
        """This object, so Lightning finds `set_epoch` at `loader.batch_sampler.sampler`."""
        return self

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose tie-breaks and batch order `__iter__` yields."""
        if epoch != self.epoch:
            self._resume_at = 0  # a restored position belongs to the restored epoch only
        self.epoch = epoch

    def all_batches(self) -> list[list[int]]:
        """The batches of every rank for the current epoch, in order."""
        rng = np.random.default_rng([self.seed, self.epoch])
        tiebreak = (
            rng.permutation(len(self.longest)) if self.shuffle else np.arange(len(self.longest))
        )
        # np.lexsort sorts by the last key first: longest side, then source, then target length.
        order = np.lexsort((tiebreak, self.tgt_lengths, self.src_lengths, self.longest))
        # Cutting at every batch end leaves one empty piece after the last batch.
        batches = [b.tolist() for b in np.split(order, np.cumsum(self.sizes))[:-1]]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def batches(self) -> list[list[int]]:
        """This rank's batches of the current epoch, in the order they are yielded."""
        return self.all_batches()[self.rank :: self.world_size]

    def __iter__(self) -> Iterator[list[int]]:
        start, self._resume_at = self._resume_at, 0
        self.consumed = start
        for batch in self.batches()[start:]:
            self.consumed += 1
            yield batch

    def __len__(self) -> int:
        return len(self.sizes) // self.world_size

    def state_dict(self) -> dict[str, int]:
        """Where this rank stands: the epoch and how many of its batches it has yielded."""
        return {
            "seed": self.seed,
            "epoch": self.epoch,
            "consumed": self.consumed,
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume at a `state_dict`: the next `__iter__` continues that epoch's order."""
        for key in ("seed", "world_size"):
            if state[key] != getattr(self, key):
                raise ValueError(
                    f"cannot resume a sampler saved with {key}={state[key]} "
                    f"under {key}={getattr(self, key)}: the epoch order would differ"
                )
        self.epoch = state["epoch"]
        self.consumed = self._resume_at = state["consumed"]


def greedy_sizes(sorted_longest: Sequence[int] | np.ndarray, max_tokens: int) -> list[int]:
    """Cut ascending lengths into consecutive batches, each as large as the budget allows.

    A length over the budget goes alone in its batch (as fairseq's inference batches do);
    `TokenBatchSampler` refuses such an example before it gets here.
    """
    sizes: list[int] = []
    count = 0
    for length in np.asarray(sorted_longest).tolist():
        # Lengths ascend, so the newest example is the batch's longest.
        if count and (count + 1) * length > max_tokens:
            sizes.append(count)
            count = 0
        count += 1
    if count:
        sizes.append(count)
    return sizes


def _split_to_multiple(sizes: list[int], world_size: int) -> list[int]:
    """Halve the largest batches until their count divides by `world_size`.

    A half of a batch is within the budget of the whole, and both halves stay in length order.
    """
    sizes = list(sizes)
    while len(sizes) % world_size:
        i = int(np.argmax(sizes))
        if sizes[i] < 2:
            raise ValueError(
                f"{sum(sizes)} examples cannot fill the same number of batches on "
                f"{world_size} ranks; use fewer devices or raise max_tokens"
            )
        sizes[i : i + 1] = [sizes[i] - sizes[i] // 2, sizes[i] // 2]
    return sizes


def collate(
    examples: list[dict], pad_id: int, pad_to_multiple_of: int = 1, max_tokens: int | None = None
) -> dict:
    """Pad a list of examples into a batch, framing the target (BOS + tgt in, tgt + EOS out).

    Args:
        examples: dicts with "src" (source ids ending in EOS), "tgt" (target ids, no special
            tokens), and optionally "src_text" and "tgt_text" (raw strings), and, from several
            directions, "bos_id" (the decoder's first token) and "direction" (an index).
        pad_id: fills each sequence up to the longest of the batch.
        pad_to_multiple_of: round the padded lengths up to a multiple of this, as the tensor
            cores of GPUs prefer; 1 pads to the longest only.
        max_tokens: if given, each side rounds to `rounding_multiple`'s multiple instead, which
            keeps it within this budget plus `padding.ROUNDING_ALLOWANCE` of it.

    Returns:
        "src" (B, S), "tgt_in" (B, T) = BOS + tgt, "tgt_out" (B, T) = tgt + EOS as LongTensors;
        "tgt_index" (N,): flat indices of the N non-pad positions of tgt_out, computed here on
        the host so that selecting them on a GPU needs no device sync; plus "src_text" and
        "tgt_text" (lists of B strings) and "direction" (B,) when the examples carry them.
    """
    src = [ex["src"] for ex in examples]
    tgt_in = [decoder_input(ex["tgt"], first_token(ex)) for ex in examples]
    rows = len(examples)
    src_multiple = rounding_multiple(rows, max(map(len, src)), pad_to_multiple_of, max_tokens)
    tgt_multiple = rounding_multiple(rows, max(map(len, tgt_in)), pad_to_multiple_of, max_tokens)
    tgt_out = pad_batch([decoder_target(ex["tgt"]) for ex in examples], tgt_multiple, pad_id)
    batch = {
        "src": pad_batch(src, src_multiple, pad_id),
        "tgt_in": pad_batch(tgt_in, tgt_multiple, pad_id),
        "tgt_out": tgt_out,
        "tgt_index": (tgt_out.flatten() != pad_id).nonzero().squeeze(1),
    }
    for key in ("src_text", "tgt_text"):
        if key in examples[0]:
            batch[key] = [ex[key] for ex in examples]
    if "direction" in examples[0]:
        batch["direction"] = torch.tensor([ex["direction"] for ex in examples])
    return batch
