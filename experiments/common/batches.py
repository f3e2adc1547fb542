"""Batches as training and decoding meet them: real Multi30k lengths, random token ids.

Lengths are Multi30k de-en's (train for training batches, test for decoding) under the
project's Multi30k BPE, trained once and cached in cache/. Ids are random, so a size with
another vocabulary (base's 32k) needs no tokenizer of its own: ids do not change the work done.
"""

from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig

from transformer_nmt.cli.compose import compose_group
from transformer_nmt.data.batching import TokenBatchSampler, collate
from transformer_nmt.data.bitext import TextCorpus, read_lines
from transformer_nmt.data.padding import pad_multiple, rounding_budget
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID, BPETokenizer, load_or_train

ROOT = Path(__file__).resolve().parents[2]
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
DATA = compose_group("data", "multi30k")  # as training composes it, base config included
FIRST_ID = 4  # random ids start after PAD, BOS, EOS and UNK
LIGHTNING_PRECISION = {"fp32": "32-true", "bf16": "bf16-mixed"}  # what training runs each as


def multi30k_tokenizer(data: DictConfig = DATA) -> BPETokenizer:
    """The BPE training trains for `data` on Multi30k, from cache/ once trained."""
    corpus = TextCorpus(str(MULTI30K), dict(data.corpus.splits))
    return load_or_train(
        ROOT / "cache",
        lambda: (s for pair in corpus.read("train", data.src_lang, data.tgt_lang) for s in pair),
        vocab_size=data.vocab_size,
        min_frequency=data.min_frequency,
        fingerprint=corpus.fingerprint("train", data.src_lang, data.tgt_lang),
    )


def multi30k_lengths(data: DictConfig = DATA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source and target lengths of the train pairs as the model sees them, test source lengths.

    Pairs longer than the data config's max_len are dropped, as the data module does.
    """
    pairs = TextCorpus(str(MULTI30K), dict(data.corpus.splits)).read(
        "train", data.src_lang, data.tgt_lang
    )
    tokenizer = multi30k_tokenizer(data)
    src = np.array([len(ids) for ids in tokenizer.encode_batch([s for s, _ in pairs])])
    tgt = np.array([len(ids) for ids in tokenizer.encode_batch([t for _, t in pairs])])
    keep = (src <= data.max_len) & (tgt <= data.max_len)
    test = read_lines(MULTI30K / f"{data.corpus.splits.test}.{data.src_lang}.gz")
    test_src = np.array([len(ids) for ids in tokenizer.encode_batch([s.strip() for s in test])])
    # +1: EOS ends the source, BOS starts tgt_in and EOS ends tgt_out.
    return src[keep] + 1, tgt[keep] + 1, test_src + 1


def random_ids(rng: np.random.Generator, length: int, vocab: int) -> list[int]:
    return rng.integers(FIRST_ID, vocab, size=length).tolist()


def training_batches(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    vocab: int,
    count: int | None = None,
    precision: str = "fp32",
    data: DictConfig = DATA,
) -> list[dict]:
    """The first `count` (default all) batches of the training sampler's epoch 0 (seed 0).

    Token budget and padding as the data module's for `data` when training in `precision`.
    """
    multiple = pad_multiple(data.pad_to_multiple_of, LIGHTNING_PRECISION[precision])
    sampler = TokenBatchSampler(src_lengths, tgt_lengths, data.max_tokens, seed=0)
    rng = np.random.default_rng(0)
    return [
        collate(
            [
                {
                    "src": [*random_ids(rng, src_lengths[i] - 1, vocab), EOS_ID],
                    "tgt": random_ids(rng, tgt_lengths[i] - 1, vocab),
                }
                for i in batch
            ],
            PAD_ID,
            multiple,
            rounding_budget(data.pad_to_multiple_of, data.max_tokens),
        )
        for batch in sampler.all_batches()[:count]
    ]


def largest_batches(batches: list[dict], count: int) -> list[dict]:
    """The `count` batches with the most padded positions (source + target): the memory peak."""
    by_size = sorted(batches, key=lambda b: b["src"].numel() + b["tgt_in"].numel(), reverse=True)
    return by_size[:count]


def decoding_batches(
    lengths: np.ndarray, vocab: int, sentences: int, batch_size: int
) -> list[torch.Tensor]:
    """The first `sentences` test sources, sorted by length and cut into (B, S) batches.

    Sorted, so a batch holds similar lengths: generate() caps a whole batch at its longest
    source + max_len_b, where our search and the torch reference cap each row at its own.
    """
    rng = np.random.default_rng(1)
    rows = sorted(lengths[:sentences].tolist())
    return [
        collate(
            [{"src": [*random_ids(rng, n - 1, vocab), EOS_ID], "tgt": []} for n in rows[i:j]],
            PAD_ID,
        )["src"]
        for i, j in ((i, i + batch_size) for i in range(0, len(rows), batch_size))
    ]


def bucketed_batches(count: int, tokens: int, vocab: int, seed: int = 0) -> list[dict]:
    """Batches of about `tokens` target tokens, one length of 13 to 30 tokens each, no files read.

    Within a batch the lengths vary by up to two tokens, as length-bucketing leaves them.
    """
    g = torch.Generator().manual_seed(seed)
    words = lambda n: torch.randint(FIRST_ID, vocab, (n,), generator=g).tolist()  # noqa: E731
    batches = []
    for _ in range(count):
        length = int(torch.randint(13, 31, (), generator=g))
        pairs = [
            {"src": [*words(length - i % 3), EOS_ID], "tgt": words(length - i % 2)}
            for i in range(tokens // length)
        ]
        batches.append(collate(pairs, PAD_ID, pad_to_multiple_of=1))
    return batches


def real_lengths(ids: torch.Tensor) -> torch.Tensor:
    """(B, T) ids -> (B,) tokens that are not padding."""
    return (ids != PAD_ID).sum(1)


def target_tokens(batches: list[dict]) -> int:
    """Real (non-pad) target tokens: what a training step learns from."""
    return sum(int(real_lengths(b["tgt_out"]).sum()) for b in batches)
