"""Our Transformer's training and decoding speed against nn.Transformer, MarianMT, x-transformers.

Side by side in one process, on the same length-bucketed batches and the same model sizes:
training steps (forward, label-smoothed loss, backward, Adam) in target tokens per second and
as a share of the matmul peak measured in the same run, fp32 and bf16 autocast; greedy and
beam-4 decoding in sentences and output tokens per second; peak memory of training (one fresh
process per implementation); optionally a profile of our training step. The record, with
what every column means: experiments/speed/README.md.

Sentence lengths are real: Multi30k de-en train (batches) and test (decoding) encoded with the
project's Multi30k BPE (8000 tokens, cached in cache/). Token ids are random, so the 32k
vocabulary of the base size needs no second tokenizer; ids do not change the work done.

    nice -n 10 python experiments/speed/benchmark.py --sizes small,base --precisions fp32,bf16

MarianMT needs `pip install transformers` (for this benchmark only, not a project dependency);
without it that column is skipped.
"""

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from experiments.machine import cpu_description, load_average  # noqa: E402

from transformer_nmt.allocator import use_fast_malloc  # noqa: E402

if __name__ == "__main__":
    use_fast_malloc()  # the allocator train.py runs with (experiments/allocator/)

from transformer_nmt.cli.compose import compose_group  # noqa: E402
from transformer_nmt.data.batching import TokenBatchSampler, collate  # noqa: E402
from transformer_nmt.data.bitext import TextCorpus, read_lines  # noqa: E402
from transformer_nmt.data.datamodule import pad_multiple, rounding_budget  # noqa: E402
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, load_or_train  # noqa: E402
from transformer_nmt.model import Transformer, beam_search, greedy_search  # noqa: E402
from transformer_nmt.training.loss import label_smoothed_nll  # noqa: E402
from transformer_nmt.training.module import real_target_logits  # noqa: E402
from transformer_nmt.training.precision import (  # noqa: E402
    auto_cpu_precision,
    cpu_has_native_bf16,
)

# nn.Transformer's encoder runs on nested tensors at inference, and says so on every call.
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype")
try:
    import transformers
except ImportError:
    transformers = None  # main() says that the MarianMT column is skipped
try:
    import x_transformers
except ImportError:
    x_transformers = None  # main() says that the x-transformers column is skipped

MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
DATA = compose_group("data", "multi30k")  # as training composes it, base config included
EPSILON = 0.1  # label smoothing (paper, section 5.4)
BEAM = 4
ALPHA = 0.6  # length penalty exponent (paper, section 6.1)
FIRST_ID = 4  # random ids start after PAD, BOS, EOS and UNK
LIGHTNING_PRECISION = {"fp32": "32-true", "bf16": "bf16-mixed"}  # what training runs each as


@dataclass(frozen=True)
class Size:
    N: int
    d_model: int
    d_ff: int
    h: int
    vocab: int


def model_size(name: str, vocab: int) -> Size:
    """The `model=<name>` preset as training composes it (conf/model/)."""
    model = compose_group("model", name)
    return Size(N=model.N, d_model=model.d_model, d_ff=model.d_ff, h=model.h, vocab=vocab)


# small with Multi30k's BPE; base (Table 3, first row) with the paper's 32k en-fr vocabulary.
SIZES = {"small": model_size("small", DATA.vocab_size), "base": model_size("base", 32000)}


# ---------------------------------------------------------------------------------------------
# The three implementations: a model, its training loss, greedy and beam-4 decoding.
# Decoding returns the number of output tokens (EOS included, BOS and padding not).


def ours_loss(model: Transformer, batch: dict) -> Tensor:
    """Our training loss per target token, as TranslationModule computes it; one place to switch.

    Only the non-pad target positions (collate's "tgt_index") get the output projection, in
    bf16 rounded up as training rounds them (`projected_rows`).
    """
    precision = "bf16-mixed" if torch.is_autocast_enabled("cpu") else "32-true"
    logits, target = real_target_logits(model, batch, precision)
    loss, _ = label_smoothed_nll(logits, target, EPSILON)
    return loss / target.numel()


def never_eos(projection: Tensor) -> None:
    """Zero EOS's row of an output projection, so its logit, 0, stays far below the best.

    A random model emits EOS at arbitrary steps (ours at the first, Marian's hardly ever), which
    would give each implementation different work; without EOS every output runs to its cap.
    """
    with torch.no_grad():
        projection[EOS_ID] = 0.0


class Ours:
    name = "ours"
    training_only = False

    def __init__(self, size: Size):
        self.model = Transformer(
            size.vocab, PAD_ID, N=size.N, d_model=size.d_model, d_ff=size.d_ff, h=size.h
        )
        never_eos(self.model.generator.weight)

    def loss(self, batch: dict) -> Tensor:
        return ours_loss(self.model, batch)

    def greedy(self, src: Tensor, max_len_b: int) -> int:
        out = greedy_search(self.model, src, BOS_ID, EOS_ID, max_len_b=max_len_b)
        return int((out != PAD_ID).sum())

    def beam(self, src: Tensor, max_len_b: int) -> int:
        found = beam_search(self.model, src, BOS_ID, EOS_ID, BEAM, ALPHA, max_len_b=max_len_b)
        return sum(len(hypotheses[0].tokens) for hypotheses in found)


class OursCompiled(Ours):
    """Ours under `torch.compile` with dynamic shapes, as `module.compile=true` trains it.

    Only the forward is compiled, so its decoding would be ours again: it trains only. Its
    warm-up steps hold the compilation.
    """

    name = "ours-compiled"
    training_only = True

    def __init__(self, size: Size):
        super().__init__(size)
        self.model.compile(dynamic=True)


def sinusoids(length: int, d_model: int) -> Tensor:
    """(length, d_model) sinusoidal position encodings (section 3.5)."""
    position = torch.arange(length)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table


class TorchTransformer(nn.Module):
    """The straightforward recipe: shared embedding, positions, nn.Transformer, tied projection."""

    def __init__(self, size: Size, dropout: float = 0.1, max_positions: int = 1024):
        super().__init__()
        self.scale = math.sqrt(size.d_model)
        self.embed = nn.Embedding(size.vocab, size.d_model, padding_idx=PAD_ID)
        self.register_buffer("positions", sinusoids(max_positions, size.d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(
            size.d_model, size.h, size.N, size.N, size.d_ff, dropout, batch_first=True
        )
        self.out = nn.Linear(size.d_model, size.vocab, bias=False)
        self.out.weight = self.embed.weight
        never_eos(self.out.weight)

    def embed_tokens(self, ids: Tensor) -> Tensor:
        return self.dropout(self.embed(ids) * self.scale + self.positions[: ids.size(1)])

    def encode(self, src: Tensor) -> Tensor:
        """(B, S) -> memory (B, S, d_model)."""
        return self.transformer.encoder(self.embed_tokens(src), src_key_padding_mask=src == PAD_ID)

    def decode_states(self, tgt_in: Tensor, memory: Tensor, src_pad: Tensor) -> Tensor:
        """(B, T) -> (B, T, d_model); src_pad (B, S) is True at padding (nn.Transformer's way)."""
        T = tgt_in.size(1)
        future = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).triu(1)  # True = blocked
        return self.transformer.decoder(
            self.embed_tokens(tgt_in),
            memory,
            tgt_mask=future,
            tgt_is_causal=True,
            tgt_key_padding_mask=tgt_in == PAD_ID,
            memory_key_padding_mask=src_pad,
        )

    def next_logits(self, prefix: Tensor, memory: Tensor, src_pad: Tensor) -> Tensor:
        """(B, T) prefixes -> (B, V) logits of the next token, from the whole prefix (no cache)."""
        return self.out(self.decode_states(prefix, memory, src_pad)[:, -1])

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """(B, S), (B, T) -> logits (B, T, V)."""
        return self.out(self.decode_states(tgt_in, self.encode(src), src == PAD_ID))


@torch.no_grad()
def uncached_greedy(model: TorchTransformer, src: Tensor, max_len_b: int) -> Tensor:
    """Greedy search recomputing the decoder on the whole prefix every step; (B, T_out) ids."""
    src_pad = src == PAD_ID
    memory = model.encode(src)
    max_lens = (~src_pad).sum(1) + max_len_b  # (B,)
    ys = torch.full((src.size(0), 1), BOS_ID, dtype=torch.long)  # (B, 1 + t)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    for t in range(int(max_lens.max())):
        logits = model.next_logits(ys, memory, src_pad)  # (B, V)
        logits[:, [PAD_ID, BOS_ID]] = float("-inf")
        tokens = logits.argmax(-1).masked_fill(finished, PAD_ID)
        ys = torch.cat([ys, tokens[:, None]], dim=1)
        finished |= (tokens == EOS_ID) | (t + 1 >= max_lens)
        if finished.all():
            break
    return ys[:, 1:]


@torch.no_grad()
def uncached_beam(model: TorchTransformer, src: Tensor, max_len_b: int) -> Tensor:
    """Plain batched beam search without a cache; (B, T_out) ids of each sentence's best beam.

    A finished beam extends only with padding at no cost, so it keeps its score and place; the
    search runs until every beam has finished. Beams are ranked by the GNMT length penalty.
    """
    B, K = src.size(0), BEAM
    src_pad = src == PAD_ID
    max_lens = ((~src_pad).sum(1) + max_len_b).repeat_interleave(K)  # (B * K,)
    memory = model.encode(src).repeat_interleave(K, dim=0)  # (B * K, S, d_model)
    src_pad = src_pad.repeat_interleave(K, dim=0)
    ys = torch.full((B * K, 1), BOS_ID, dtype=torch.long)  # (B * K, 1 + t)
    scores = torch.full((B, K), float("-inf"))
    scores[:, 0] = 0.0  # K identical BOS beams: only the first may expand
    finished = torch.zeros(B * K, dtype=torch.bool)
    first_row = torch.arange(B)[:, None] * K  # (B, 1)
    for t in range(int(max_lens.max())):
        log_probs = model.next_logits(ys, memory, src_pad).float().log_softmax(-1)  # (B*K, V)
        log_probs[:, [PAD_ID, BOS_ID]] = float("-inf")
        log_probs[finished] = float("-inf")
        log_probs[finished, PAD_ID] = 0.0
        V = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(B, K * V)
        scores, ids = candidates.topk(K, dim=1)  # (B, K)
        rows = (first_row + ids // V).view(-1)  # (B * K,) the beam each candidate extends
        tokens = (ids % V).view(-1)
        ys = torch.cat([ys[rows], tokens[:, None]], dim=1)
        finished = finished[rows] | (tokens == EOS_ID) | (t + 1 >= max_lens)
        if finished.all():
            break
    lengths = (ys[:, 1:] != PAD_ID).sum(1)
    penalized = scores.view(-1) / ((5 + lengths) / 6) ** ALPHA
    best = penalized.view(B, K).argmax(1) + first_row[:, 0]
    return ys[best, 1:]


class Torch:
    name = "torch"
    training_only = False

    def __init__(self, size: Size):
        self.model = TorchTransformer(size)

    def loss(self, batch: dict) -> Tensor:
        logits = self.model(batch["src"], batch["tgt_in"])
        return F.cross_entropy(
            logits.float().flatten(0, 1),
            batch["tgt_out"].flatten(),
            ignore_index=PAD_ID,
            label_smoothing=EPSILON,
        )

    def greedy(self, src: Tensor, max_len_b: int) -> int:
        return int((uncached_greedy(self.model, src, max_len_b) != PAD_ID).sum())

    def beam(self, src: Tensor, max_len_b: int) -> int:
        return int((uncached_beam(self.model, src, max_len_b) != PAD_ID).sum())


class Marian:
    name = "marian"
    training_only = False

    def __init__(self, size: Size):
        config = transformers.MarianConfig(
            vocab_size=size.vocab,
            decoder_vocab_size=size.vocab,
            d_model=size.d_model,
            encoder_layers=size.N,
            decoder_layers=size.N,
            encoder_attention_heads=size.h,
            decoder_attention_heads=size.h,
            encoder_ffn_dim=size.d_ff,
            decoder_ffn_dim=size.d_ff,
            activation_function="relu",  # the paper's; Marian's default is swish
            dropout=0.1,
            attention_dropout=0.0,
            activation_dropout=0.0,
            scale_embedding=True,
            max_position_embeddings=1024,
            pad_token_id=PAD_ID,
            bos_token_id=BOS_ID,
            eos_token_id=EOS_ID,
            decoder_start_token_id=BOS_ID,
            forced_eos_token_id=None,
        )
        self.model = transformers.MarianMTModel(config)
        never_eos(self.model.get_output_embeddings().weight)

    def loss(self, batch: dict) -> Tensor:
        src = batch["src"]
        logits = self.model(
            input_ids=src, attention_mask=src != PAD_ID, decoder_input_ids=batch["tgt_in"]
        ).logits
        return F.cross_entropy(
            logits.float().flatten(0, 1),
            batch["tgt_out"].flatten(),
            ignore_index=PAD_ID,
            label_smoothing=EPSILON,
        )

    def generate(self, src: Tensor, max_len_b: int, num_beams: int) -> int:
        """One cap per batch (generate has no per-row one): its longest source + max_len_b."""
        mask = src != PAD_ID
        out = self.model.generate(
            input_ids=src,
            attention_mask=mask,
            num_beams=num_beams,
            do_sample=False,
            max_new_tokens=int(mask.sum(1).max()) + max_len_b,
            length_penalty=ALPHA,
            early_stopping=True,
            use_cache=True,
        )
        return int((out[:, 1:] != PAD_ID).sum())  # out starts with decoder_start_token_id

    def greedy(self, src: Tensor, max_len_b: int) -> int:
        return self.generate(src, max_len_b, num_beams=1)

    def beam(self, src: Tensor, max_len_b: int) -> int:
        return self.generate(src, max_len_b, num_beams=BEAM)


class XTransformers:
    """lucidrains' x-transformers, set to the paper: post-norm, ReLU, residual dropout 0.1.

    Its attention is its own (einsum and softmax; its `flash` switch, SDPA, is off by default).
    Positions are learned (its default), the one difference in work from the paper: a lookup.
    Trains only: its decoding has no beam search.
    """

    name = "x-transformers"
    training_only = True

    def __init__(self, size: Size):
        layers = dict(
            dim=size.d_model, depth=size.N, heads=size.h, pre_norm=False,
            ff_mult=size.d_ff // size.d_model, ff_custom_activation=nn.ReLU(),
            ff_sublayer_dropout=0.1, attn_sublayer_dropout=0.1,
        )  # fmt: skip
        wrapper = dict(num_tokens=size.vocab, max_seq_len=1024, emb_dropout=0.1)
        self.encoder = x_transformers.TransformerWrapper(
            **wrapper, return_only_embed=True, attn_layers=x_transformers.Encoder(**layers)
        )
        self.decoder = x_transformers.TransformerWrapper(
            **wrapper, tie_embedding=True,
            attn_layers=x_transformers.Decoder(**layers, cross_attend=True),
        )  # fmt: skip
        self.decoder.token_emb = self.encoder.token_emb  # one embedding for source, target, output
        self.model = nn.ModuleList([self.encoder, self.decoder])

    def loss(self, batch: dict) -> Tensor:
        src = batch["src"]
        mask = src != PAD_ID
        memory = self.encoder(src, mask=mask, return_embeddings=True)
        logits = self.decoder(batch["tgt_in"], context=memory, context_mask=mask)
        return F.cross_entropy(
            logits.float().flatten(0, 1),
            batch["tgt_out"].flatten(),
            ignore_index=PAD_ID,
            label_smoothing=EPSILON,
        )


IMPLEMENTATIONS = {
    "ours": Ours, "ours-compiled": OursCompiled, "torch": Torch, "marian": Marian,
    "x-transformers": XTransformers,
}  # fmt: skip


def build(name: str, size: Size):
    torch.manual_seed(0)
    return IMPLEMENTATIONS[name](size)


# ---------------------------------------------------------------------------------------------
# Data: real lengths, random ids.


def multi30k_lengths() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source and target lengths of the train pairs as the model sees them, test source lengths.

    Pairs longer than the data config's max_len are dropped, as the data module does.
    """
    corpus = TextCorpus(str(MULTI30K), dict(DATA.corpus.splits))
    pairs = corpus.read("train", DATA.src_lang, DATA.tgt_lang)
    tokenizer = load_or_train(
        ROOT / "cache",
        lambda: (s for pair in pairs for s in pair),
        vocab_size=DATA.vocab_size,
        min_frequency=DATA.min_frequency,
        fingerprint=corpus.fingerprint("train", DATA.src_lang, DATA.tgt_lang),
    )
    src = np.array([len(ids) for ids in tokenizer.encode_batch([s for s, _ in pairs])])
    tgt = np.array([len(ids) for ids in tokenizer.encode_batch([t for _, t in pairs])])
    keep = (src <= DATA.max_len) & (tgt <= DATA.max_len)
    test = read_lines(MULTI30K / f"{DATA.corpus.splits.test}.{DATA.src_lang}.gz")
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
) -> list[dict]:
    """The first `count` (default all) batches of the training sampler's epoch 0 (seed 0).

    Budget and padding as the data module's for data=multi30k when training in `precision`.
    """
    multiple = pad_multiple(DATA.pad_to_multiple_of, LIGHTNING_PRECISION[precision])
    sampler = TokenBatchSampler(src_lengths, tgt_lengths, DATA.max_tokens, seed=0)
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
            rounding_budget(DATA.pad_to_multiple_of, DATA.max_tokens),
        )
        for batch in sampler.all_batches()[:count]
    ]


def largest_batches(batches: list[dict], count: int) -> list[dict]:
    """The `count` batches with the most padded positions (source + target): the memory peak."""
    by_size = sorted(batches, key=lambda b: b["src"].numel() + b["tgt_in"].numel(), reverse=True)
    return by_size[:count]


def decoding_batches(lengths: np.ndarray, vocab: int, sentences: int, batch_size: int) -> list:
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


def real_lengths(ids: Tensor) -> Tensor:
    return (ids != PAD_ID).sum(1)


# ---------------------------------------------------------------------------------------------
# Measurements.


def training_flops(size: Size, src: Tensor, tgt_in: Tensor) -> float:
    """FLOPs of one training step over the real (non-pad) tokens: 3x the forward's matmuls.

    Forward, 2 FLOPs per multiply-add: every projection weight once per token it applies to
    (encoder: Q, K, V, O and the FFN on source tokens; decoder: self-attention Q, K, V, O,
    cross-attention Q and O and the FFN on target tokens, cross-attention K and V on source
    tokens; the output projection on target tokens), plus attention's Q K^T and weights x V,
    2 S_q S_k d_model each per layer and sentence, counted in full (not halved for the causal
    mask). Backward is twice the forward. Embedding lookups, softmax and norms are not counted.
    """
    d, d_ff, N, V = size.d_model, size.d_ff, size.N, size.vocab
    S, T = real_lengths(src).double(), real_lengths(tgt_in).double()
    encoder = N * (S.sum() * 2 * (4 * d * d + 2 * d * d_ff) + (S * S).sum() * 4 * d)
    decoder = N * (
        T.sum() * 2 * (6 * d * d + 2 * d * d_ff)
        + S.sum() * 2 * (2 * d * d)
        + (T * T).sum() * 4 * d
        + (S * T).sum() * 4 * d
    )
    output = T.sum() * 2 * d * V
    return 3 * float(encoder + decoder + output)


def matmul_peak(dtype: torch.dtype, n: int, repeats: int) -> dict[str, float]:
    """FLOP/s of an (n, n) x (n, n) product per operand layout, fastest of `repeats` runs.

    The layouts differ a lot where bf16 is emulated: a linear layer's forward multiplies by a
    transposed weight ("a @ b.T"), its backward also runs the other two.
    """
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    products = {"a @ b": lambda: a @ b, "a @ b.T": lambda: a @ b.T, "a.T @ b": lambda: a.T @ b}
    flops = {}
    for layout, product in products.items():
        product()  # warm-up
        best = math.inf
        for _ in range(repeats):
            start = time.perf_counter()
            product()
            best = min(best, time.perf_counter() - start)
        flops[layout] = 2 * n**3 / best
    return flops


def autocast(precision: str):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")


def train_step(impl, optimizer: torch.optim.Optimizer, batch: dict, precision: str) -> None:
    with autocast(precision):
        loss = impl.loss(batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """The paper's Adam (section 5.3); the learning rate does not change the speed."""
    return torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)


def time_training(
    impl, batches: list[dict], warmup: int, precision: str, seen_shapes: bool = False
) -> float:
    """Seconds for batches[warmup:], after training steps on batches[:warmup].

    seen_shapes: first one untimed step on each timed batch as well, so that no timed step
    meets a new shape (as in a long run's later epochs, where the batch shapes recur).
    """
    impl.model.train()
    optimizer = make_optimizer(impl.model)
    torch.manual_seed(0)  # the same dropout masks for every implementation's first step
    for batch in batches[:warmup] + (batches[warmup:] if seen_shapes else []):
        train_step(impl, optimizer, batch, precision)
    start = time.perf_counter()
    for batch in batches[warmup:]:
        train_step(impl, optimizer, batch, precision)
    return time.perf_counter() - start


def profile_training(impl, batches: list[dict], precision: str, rows: int) -> str:
    """A markdown table of the operators with the most self CPU time in training steps.

    The first batch is an untimed step, so that Adam's state exists before profiling.
    """
    impl.model.train()
    optimizer = make_optimizer(impl.model)
    first, *profiled = batches
    train_step(impl, optimizer, first, precision)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for batch in profiled:
            train_step(impl, optimizer, batch, precision)
        seconds = time.perf_counter() - start
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    lines = [
        f"{len(profiled)} step(s), {seconds:.2f} s wall time under the profiler, "
        f"{total / 1e6:.2f} s self CPU time in operators",
        "",
        "| operator | calls | self CPU s | share |",
        "|---|---|---|---|",
    ]
    for e in events[:rows]:
        lines.append(
            f"| `{e.key}` | {e.count} | {e.self_cpu_time_total / 1e6:.3f} "
            f"| {e.self_cpu_time_total / total:.1%} |"
        )
    rest = sum(e.self_cpu_time_total for e in events[rows:])
    lines.append(f"| (all other operators) | | {rest / 1e6:.3f} | {rest / total:.1%} |")
    return "\n".join(lines)


def time_decoding(impl, batches: list[Tensor], search: str, max_len_b: int) -> tuple[float, int]:
    """Seconds and output tokens for decoding all batches."""
    decode = impl.greedy if search == "greedy" else impl.beam
    start = time.perf_counter()
    tokens = sum(decode(src, max_len_b) for src in batches)
    return time.perf_counter() - start, tokens


def peak_rss_gb() -> float:
    """This process's peak resident memory since it started, VmHWM.

    Not getrusage's ru_maxrss: Linux carries that across fork and exec, so a child would start
    at its parent's peak.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20  # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def memory_child(impl_name: str, size_name: str, batches_file: str) -> None:
    """In a fresh process: train on the saved batches, print the peak RSS before and after."""
    batches = torch.load(batches_file)
    before = peak_rss_gb()
    impl = build(impl_name, SIZES[size_name])
    impl.model.train()
    optimizer = make_optimizer(impl.model)
    for batch in batches:
        train_step(impl, optimizer, batch, "fp32")
    print(json.dumps({"before": before, "peak": peak_rss_gb()}))


def measure_memory(
    impl_name: str, size_name: str, batches: list[dict], threads: int
) -> dict[str, float]:
    """Peak RSS of fp32 training on `batches` in a fresh process (the allocator of this one)."""
    with tempfile.TemporaryDirectory() as tmp:
        batches_file = str(Path(tmp) / "batches.pt")
        torch.save(batches, batches_file)
        command = [
            sys.executable, __file__, "--memory-child", f"{impl_name}:{size_name}:{batches_file}",
            "--threads", str(threads),
        ]  # fmt: skip
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="small,base", help="comma-separated: small, base")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated: fp32, bf16")
    parser.add_argument(
        "--implementations", default="ours,torch,marian,x-transformers",
        help=f"comma-separated: {', '.join(IMPLEMENTATIONS)}",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=10, help="timed fp32 training steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed fp32 steps before them")
    parser.add_argument(
        "--bf16-steps", type=int, default=1,
        help="timed bf16 steps: without native bf16 (AVX2-only CPUs) one takes minutes",
    )  # fmt: skip
    parser.add_argument(
        "--bf16-warmup", type=int, default=1 if cpu_has_native_bf16() else 0,
        help="untimed bf16 steps; default 0 where bf16 is emulated (a step's one-off costs are "
        "lost in its minutes), else 1",
    )  # fmt: skip
    parser.add_argument(
        "--seen-shapes", action="store_true",
        help="one untimed step on each timed batch first: no timed step meets a new shape, as "
        "in a long run's later epochs (oneDNN's bf16 kernels are generated per shape)",
    )  # fmt: skip
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="time training this many times, the implementations' order reversed every other "
        "round, so that a machine whose pace drifts slows each alike; the summary gives the "
        "median of the rounds' ratios and their range",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=256, help="first N test sentences")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per decoding batch")
    parser.add_argument(
        "--max-len-b", type=int, default=0,
        help="outputs stop at source length + this (EOS is never predicted, see never_eos)",
    )  # fmt: skip
    parser.add_argument("--no-decoding", action="store_true")
    parser.add_argument("--memory-steps", type=int, default=2, help="0 skips the memory table")
    parser.add_argument(
        "--profile", nargs="?", const="fp32",
        help="profile our training step in these precisions (comma-separated; alone: fp32)",
    )  # fmt: skip
    parser.add_argument("--profile-steps", type=int, default=1, help="profiled steps, after one")
    parser.add_argument("--profile-rows", type=int, default=15)
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.sizes = args.sizes.split(",")
    args.precisions = args.precisions.split(",")
    args.implementations = args.implementations.split(",")
    args.profile = args.profile.split(",") if args.profile else []
    for values, known in (
        (args.sizes, SIZES),
        (args.precisions + args.profile, ("fp32", "bf16")),
        (args.implementations, IMPLEMENTATIONS),
    ):
        unknown = set(values) - set(known)
        if unknown:
            parser.error(f"unknown {sorted(unknown)}; choose from {list(known)}")
    return args


HEADERS = {
    "training": ["size", "round", "implementation", "params", "precision", "steps", "s/step",
                 "target tokens/s", "GFLOP/s", "share of peak"],
    "decoding": ["size", "implementation", "search", "sentences", "s", "sentences/s",
                 "output tokens/sentence", "output tokens/s"],
    "memory": ["size", "implementation", "batches (B x S+T)", "RSS before the model, GB",
               "peak RSS, GB"],
    "summary": ["size", "measure", "ours", "tokens or sentences/s", "fastest reference",
                "reference", "ours / reference"],
}  # fmt: skip


class Tables:
    """The rows of each markdown table; a row is also printed as soon as it is measured."""

    def __init__(self):
        self.rows: dict[str, list[list]] = {name: [] for name in HEADERS}

    def add(self, name: str, row: list) -> None:
        self.rows[name].append(row)
        print(self.format_row(row), flush=True)

    @staticmethod
    def format_row(row: list) -> str:
        return "| " + " | ".join(str(cell) for cell in row) + " |"

    def markdown(self, name: str) -> str:
        lines = [self.format_row(HEADERS[name]), "|" + "---|" * len(HEADERS[name])]
        return "\n".join(lines + [self.format_row(row) for row in self.rows[name]])


def training_work(size: Size, batches: list[dict]) -> tuple[int, float]:
    """Real target tokens and training FLOPs of these batches."""
    tokens = sum(int(real_lengths(b["tgt_out"]).sum()) for b in batches)
    return tokens, sum(training_flops(size, b["src"], b["tgt_in"]) for b in batches)


def warmup_and_steps(precision: str, args: argparse.Namespace) -> tuple[int, int]:
    """Untimed and timed training steps of a precision: bf16 has its own (--bf16-*)."""
    if precision == "fp32":
        return args.warmup, args.steps
    return args.bf16_warmup, args.bf16_steps


def bench_training(
    impl, size_name: str, batches: dict[str, list[dict]], args: argparse.Namespace,
    peaks: dict, tables: Tables, speeds: dict, round_: int,
) -> None:  # fmt: skip
    """Time each precision's steps after its warm-up steps, on the first batches of its own.

    Each precision pads as training does (`pad_multiple`). bf16 runs fewer steps by default
    (--bf16-steps): where it is emulated, a step takes minutes.
    """
    size = SIZES[size_name]
    params = sum(p.numel() for p in impl.model.parameters())
    for precision in args.precisions:
        warmup, steps = warmup_and_steps(precision, args)
        run = batches[precision][: warmup + steps]
        seconds = time_training(impl, run, warmup, precision, args.seen_shapes)
        steps = len(run) - warmup
        tokens, flops = training_work(size, run[warmup:])
        measure = f"training {precision}, target tokens/s"
        speeds.setdefault((size_name, impl.name, measure), []).append(tokens / seconds)
        tables.add("training", [
            size_name, round_ + 1, impl.name, f"{params / 1e6:.1f}M", precision, steps,
            f"{seconds / steps:.2f}", f"{tokens / seconds:,.0f}", f"{flops / seconds / 1e9:.1f}",
            f"{flops / seconds / peaks[precision]:.1%}",
        ])  # fmt: skip


def bench_decoding(
    impl, size_name: str, sources: list[Tensor], args: argparse.Namespace, tables: Tables,
    speeds: dict,
) -> None:  # fmt: skip
    impl.model.eval()
    impl.greedy(sources[0][:8], args.max_len_b)  # warm-up
    sentences = sum(len(src) for src in sources)
    for search in ("greedy", f"beam {BEAM}"):
        seconds, tokens = time_decoding(impl, sources, search, args.max_len_b)
        speeds[size_name, impl.name, f"{search}, sentences/s"] = [sentences / seconds]
        tables.add("decoding", [
            size_name, impl.name, search, sentences, f"{seconds:.1f}",
            f"{sentences / seconds:.2f}", f"{tokens / sentences:.1f}", f"{tokens / seconds:,.0f}",
        ])  # fmt: skip


def bench_memory(size_name: str, batches: list[dict], args: argparse.Namespace, tables: Tables):
    shapes = ", ".join("{}x{}+{}".format(*b["src"].shape, b["tgt_in"].size(1)) for b in batches)
    for name in args.implementations:
        if IMPLEMENTATIONS[name].training_only:
            continue
        rss = measure_memory(name, size_name, batches, args.threads)
        tables.add(
            "memory", [size_name, name, shapes, f"{rss['before']:.2f}", f"{rss['peak']:.2f}"]
        )


def summarize(speeds: dict[tuple, list[float]], tables: Tables) -> None:
    """Ours (and ours-compiled) against the fastest reference, per size and measure.

    With several rounds, each round's ratio is to that round's fastest reference, and the
    summary gives the median ratio with its range; the speeds are the rounds' medians.
    """
    for (size_name, name, measure), ours in speeds.items():
        others = {
            n: s
            for (z, n, m), s in speeds.items()
            if (z, m) == (size_name, measure) and not n.startswith("ours")
        }
        if not name.startswith("ours") or not others:
            continue
        best = max(others, key=lambda n: np.median(others[n]))
        ratios = [o / max(s[r] for s in others.values()) for r, o in enumerate(ours)]
        ratio = f"{np.median(ratios):.2f}x"
        if len(ratios) > 1:
            ratio += f" ({min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} rounds)"
        tables.rows["summary"].append([
            size_name, measure, name, f"{np.median(ours):,.2f}", best,
            f"{np.median(others[best]):,.2f}", ratio,
        ])  # fmt: skip


def measure_peaks(precisions: list[str]) -> dict[str, float]:
    """The matmul peak FLOP/s per precision: its fastest operand layout (bf16 is slow: smaller)."""
    peaks = {}
    for precision, dtype, n, repeats in (("fp32", torch.float32, 2048, 5),
                                         ("bf16", torch.bfloat16, 1024, 2)):  # fmt: skip
        if precision in precisions:
            layouts = matmul_peak(dtype, n, repeats)
            peaks[precision] = max(layouts.values())
            print(
                f"{precision} matmul {n}^3, GFLOP/s: "
                + ", ".join(f"{layout} {flops / 1e9:.2f}" for layout, flops in layouts.items())
                + f"; peak {peaks[precision] / 1e9:.2f}"
            )
    print(f"trainer.precision=auto trains on this CPU in {auto_cpu_precision()}")
    return peaks


def print_report(
    tables: Tables, profiles: list[tuple[str, str, str]], args: argparse.Namespace
) -> None:
    end = load_average()
    print(f"\n## Training (after warm-up steps: fp32 {args.warmup}, bf16 {args.bf16_warmup})\n")
    print(tables.markdown("training"))
    if tables.rows["decoding"]:
        print(f"\n## Decoding (batches of {args.batch_size}, max_len_b {args.max_len_b})\n")
        print(tables.markdown("decoding"))
    if tables.rows["memory"]:
        print(
            f"\n## Peak memory of fp32 training ({args.memory_steps} steps on the batches with "
            "the most padded positions, one fresh process each)\n"
        )
        print(tables.markdown("memory"))
    if tables.rows["summary"]:
        print("\n## Ours against the fastest reference\n")
        print(tables.markdown("summary"))
    for size_name, precision, table in profiles:
        print(f"\n## Profile: our {size_name} {precision} training step, by self CPU time")
        print(f"\n{table}")
    print(f"\nMeasurements done with a {end}")


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if transformers is not None:
        transformers.logging.set_verbosity_error()
    if args.memory_child:
        memory_child(*args.memory_child.split(":"))
        return
    if "marian" in args.implementations and transformers is None:
        print(
            "transformers is not importable: skipping the MarianMT column "
            "(`pip install transformers` into this environment, for the benchmark only)\n"
        )
        args.implementations.remove("marian")
    if "x-transformers" in args.implementations and x_transformers is None:
        print(
            "x_transformers is not importable: skipping its column "
            "(`pip install x-transformers`, for the benchmark only)\n"
        )
        args.implementations.remove("x-transformers")

    if "bf16" in args.precisions and not cpu_has_native_bf16():
        print("bf16 rows skipped: this CPU has no native bf16 matmuls (bf16 is emulated)\n")
        args.precisions.remove("bf16")
    src_lengths, tgt_lengths, test_lengths = multi30k_lengths()
    print(
        f"CPU: {cpu_description()}; {args.threads} thread(s); torch {torch.__version__}"
        + (f", transformers {transformers.__version__}" if transformers else "")
        + (f", x-transformers {version('x-transformers')}" if x_transformers else "")
        + f"; GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')}; {load_average()}"
    )
    peaks = measure_peaks(args.precisions)
    tables, speeds, profiles = Tables(), {}, []
    for size_name in args.sizes:
        size = SIZES[size_name]
        count = max(2, *(sum(warmup_and_steps(p, args)) for p in ("fp32", "bf16")))
        precisions = sorted(set(args.precisions + args.profile))
        batches = {
            precision: training_batches(src_lengths, tgt_lengths, size.vocab, count, precision)
            for precision in precisions
        }
        for precision in precisions:
            warmup, steps = warmup_and_steps(precision, args)
            timed = batches[precision][warmup : warmup + steps]
            tokens, flops = training_work(size, timed)
            padded = sum(b["tgt_out"].numel() for b in timed)
            print(
                f"{size_name}: {precision} batches of {tokens / len(timed):.0f} target tokens on "
                f"average ({padded / len(timed):.0f} with padding), "
                f"{flops / tokens / 1e6:.1f} MFLOP per target token per training step"
            )
        sources = decoding_batches(test_lengths, size.vocab, args.sentences, args.batch_size)
        impls = {name: build(name, size) for name in args.implementations}
        for round_ in range(args.rounds):
            order = args.implementations[:: -1 if round_ % 2 else 1]
            for name in order:
                bench_training(impls[name], size_name, batches, args, peaks, tables, speeds, round_)
        for name, impl in impls.items():
            for precision in args.profile if name == "ours" else []:
                steps = batches[precision][: args.profile_steps + 1]
                table = profile_training(impl, steps, precision, args.profile_rows)
                profiles.append((size_name, precision, table))
            if not args.no_decoding and not impl.training_only:
                bench_decoding(impl, size_name, sources, args, tables, speeds)
        impls = impl = None  # free this size's models before the next size's
        gc.collect()
        if args.memory_steps:
            epoch = training_batches(src_lengths, tgt_lengths, size.vocab)
            bench_memory(size_name, largest_batches(epoch, args.memory_steps), args, tables)
    summarize(speeds, tables)
    print_report(tables, profiles, args)


if __name__ == "__main__":
    main()
