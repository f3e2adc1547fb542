"""The WMT-shaped training rows: batches sized by `data.max_tokens=auto`, timed updates.

Lengths are drawn, not read (the device has no WMT14 on disk): a log-normal around 24 BPE
tokens with a tail cut at max_len, targets about 1.1x their source, as WMT14 en-de under a
37k BPE looks. Ids are random: they do not change the work. An update accumulates batches to
`data.tokens_per_update` as training does, and is timed after warm-up updates, after a
synchronize; rates are medians over updates.
"""

import gc
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from experiments.common.batches import random_ids, target_tokens
from experiments.common.peers import EPSILON, Size, model_size, smoothed_cross_entropy
from experiments.common.timing import median_seconds, seconds
from experiments.gpu_check.probe import SyncCounter
from transformer_nmt.data.batching import TokenBatchSampler, collate
from transformer_nmt.data.datamodule import pad_multiple
from transformer_nmt.data.token_budget import BudgetError
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID
from transformer_nmt.model import Transformer
from transformer_nmt.training.plan.batch_size import UpdatePlan, per_rank_cap, plan_update
from transformer_nmt.training.plan.budget_probe import Measurement, measure_max_tokens
from transformer_nmt.training.plan.budget_probe import is_out_of_memory as ran_out_of_memory_error
from transformer_nmt.training.step.loss import label_smoothed_nll
from transformer_nmt.training.step.module import real_target_logits

LIGHTNING = {"bf16": "bf16-mixed", "fp32": "32-true"}


@dataclass
class Shape:
    """What the rows run: the device, its precision, the vocabulary and the lengths."""

    device: torch.device
    precision: str  # "bf16" or "fp32"
    vocab: int
    max_len: int
    tokens_per_update: int
    pairs: int
    host_memory: int | None = None  # bytes: on a CPU, the limit the budget search runs under
    warmup: int = 2  # untimed updates
    timed: int = 5  # timed updates, their median reported

    def autocast(self) -> torch.autocast:
        half = self.precision == "bf16"
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=half)

    def size(self, name: str) -> Size:
        return model_size(name, self.vocab)


def wmt_lengths(shape: Shape, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Source and target lengths as the model reads them (EOS or BOS included)."""
    rng = np.random.default_rng(seed)
    src = np.clip(np.rint(rng.lognormal(np.log(24), 0.6, shape.pairs)), 1, shape.max_len)
    tgt = np.clip(np.rint(src * rng.normal(1.1, 0.15, shape.pairs)), 1, shape.max_len)
    return src.astype(np.int64) + 1, tgt.astype(np.int64) + 1


def transformer(size: Size) -> Transformer:
    torch.manual_seed(0)
    return Transformer(size.vocab, PAD_ID, N=size.N, d_model=size.d_model, d_ff=size.d_ff, h=size.h)


def auto_budget(
    model: nn.Module, shape: Shape, lengths: tuple[int, int], world_size: int
) -> Measurement:
    """`data.max_tokens=auto` for this model on this device, as `AutoMaxTokens` measures it
    on each of `world_size` ranks: `lengths` are the shortest and the longest pair's."""
    cap = per_rank_cap(shape.tokens_per_update, world_size, max(lengths))
    measured = measure_max_tokens(
        model,
        shape.device,
        LIGHTNING[shape.precision],
        shape.autocast,
        lengths,
        cap,
        memory_limit=shape.host_memory,
    )
    free_device(shape.device)
    return measured


def batches(shape: Shape, lengths: tuple, budget: int, count: int) -> list[dict]:
    """The first `count` batches of the sampler's epoch 0 at this budget, on the device."""
    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, budget, seed=0)
    rng = np.random.default_rng(0)
    multiple = pad_multiple("auto", LIGHTNING[shape.precision])
    out = []
    for batch in sampler.all_batches()[:count]:
        examples = [
            {
                "src": [*random_ids(rng, src[i] - 1, shape.vocab), EOS_ID],
                "tgt": random_ids(rng, tgt[i] - 1, shape.vocab),
            }
            for i in batch
        ]
        collated = collate(examples, PAD_ID, multiple, budget)
        out.append({key: value.to(shape.device) for key, value in collated.items()})
    return out


def project_loss(model: nn.Module, batch: dict, precision: str) -> Tensor:
    """The training loss as TranslationModule computes it, per target token."""
    logits, target = real_target_logits(model, batch, LIGHTNING[precision])
    loss, _ = label_smoothed_nll(logits, target, EPSILON)
    return loss / target.numel()


def cross_entropy_loss(model: nn.Module, batch: dict, precision: str) -> Tensor:
    """F.cross_entropy with label smoothing over every position's full logits, padding too."""
    return smoothed_cross_entropy(model(batch["src"], batch["tgt_in"]), batch)


def adam(model: nn.Module, device: torch.device, kind: str = "fused") -> torch.optim.Optimizer:
    """The paper's Adam; fused (one kernel, training's choice on GPUs) or foreach."""
    options = {"fused": True} if kind == "fused" and device.type == "cuda" else {"foreach": True}
    return torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, **options)


@dataclass
class Rate:
    tokens_per_s: float
    peak_gb: float
    syncs_per_update: float
    updates: int


def time_updates(
    shape: Shape,
    loss: Callable[[dict], Tensor],
    optimizer: torch.optim.Optimizer,
    data: list[dict],
    accumulate: int,
) -> Rate:
    """Median target tokens/s over updates of `accumulate` batches, after warm-up updates."""
    updates = [data[i : i + accumulate] for i in range(0, len(data), accumulate)]
    updates = [u for u in updates if len(u) == accumulate]

    def update(batches: list[dict]) -> None:
        for batch in batches:
            with shape.autocast():
                value = loss(batch)
            value.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    warmup = shape.warmup
    for batches_ in updates[:warmup]:
        update(batches_)
    if shape.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(shape.device)
    timed = updates[warmup:]
    rates = [target_tokens(u) / seconds(lambda u=u: update(u), shape.device) for u in timed]
    counter = SyncCounter()  # one more update, untimed: synchronize() would count as one
    counter.start(shape.device)
    update(timed[0])
    counter.stop()
    peak = torch.cuda.max_memory_allocated(shape.device) if shape.device.type == "cuda" else 0
    return Rate(statistics.median(rates), peak / 2**30, counter.syncs.total(), len(timed))


def matmul_params(model: nn.Module) -> int:
    """Weights that multiply activations: every linear layer's, the output projection's too."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))


def matmul_peak(shape: Shape) -> float:
    """FLOP/s of a large square matmul in the rows' precision, measured on this device."""
    n = 8192 if shape.device.type == "cuda" else 512
    dtype = torch.bfloat16 if shape.precision == "bf16" else torch.float32
    a = torch.randn(n, n, device=shape.device, dtype=dtype)
    b = torch.randn(n, n, device=shape.device, dtype=dtype)
    return 2 * n**3 / median_seconds(lambda: a @ b, repeats=10, warmup=3, device=shape.device)


def free_device(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def is_out_of_memory(error: BaseException) -> bool:
    """The device ran out, or not even one longest pair fits (the budget search says so)."""
    return isinstance(error, BudgetError) or ran_out_of_memory_error(error)


@dataclass(frozen=True)
class AutoBudget:
    """What `data.max_tokens=auto` gives one rank of `world_size`: the probe and the plan."""

    world_size: int
    measured: Measurement  # the probe on this device, capped at the rank's share
    plan: UpdatePlan  # the accumulation to tokens_per_update and the batch it shrinks to


def setup_size(shape: Shape, name: str, lengths: tuple, world_size: int = 1) -> AutoBudget:
    """The auto budget of `model=name` and the accumulation to tokens_per_update, as training
    plans them on `world_size` ranks, each rank's probe run here on the one device."""
    longer = np.maximum(lengths[0], lengths[1])
    ends = int(longer.min()), int(longer.max())
    measured = auto_budget(transformer(shape.size(name)), shape, ends, world_size)
    plan = plan_update(shape.tokens_per_update, measured.max_tokens, world_size, ends[1])
    return AutoBudget(world_size, measured, plan)
