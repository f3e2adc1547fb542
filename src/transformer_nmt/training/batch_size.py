"""The paper's batch on any number of devices: gradient accumulation from a token budget."""

import logging
import math

from lightning.fabric.accelerators.cuda import num_cuda_devices
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


def updates_per_step(tokens_per_update: int, max_tokens: int, devices: int, num_nodes: int) -> int:
    """Batches to accumulate so that one update holds at least `tokens_per_update` tokens a side.

    Args:
        tokens_per_update: tokens per side wanted in one optimizer step (the paper: ~25,000).
        max_tokens: tokens per side of one batch on one device (`TokenBatchSampler`).
        devices: devices per node.
        num_nodes: machines.
    """
    return math.ceil(tokens_per_update / (max_tokens * devices * num_nodes))


def accumulate_grad_batches(cfg: DictConfig) -> int:
    """`trainer.accumulate_grad_batches`, derived from `data.tokens_per_update` when that is set.

    `check_config` has refused a `trainer.accumulate_grad_batches` other than 1 alongside
    `data.tokens_per_update`, so the derived value never silently replaces a chosen one. Under
    `data.max_tokens=auto` it is 1 here, and `AutoMaxTokens` derives it once the budget is known.
    """
    tokens_per_update = cfg.data.get("tokens_per_update")
    if tokens_per_update is None:
        return cfg.trainer.get("accumulate_grad_batches", 1)
    if cfg.data.max_tokens == "auto":
        return 1
    devices, num_nodes = device_count(cfg.trainer), cfg.trainer.get("num_nodes", 1)
    max_tokens = cfg.data.max_tokens
    batches = updates_per_step(tokens_per_update, max_tokens, devices, num_nodes)
    log.info(
        "accumulate_grad_batches=%d: data.tokens_per_update=%d over data.max_tokens=%d x "
        "%d devices x %d nodes (%d tokens a side per update at most)",
        batches,
        tokens_per_update,
        max_tokens,
        devices,
        num_nodes,
        batches * max_tokens * devices * num_nodes,
    )
    return batches


def device_count(trainer: DictConfig) -> int:
    """Devices per node that `trainer.devices` asks for, as Lightning will read it.

    An int counts devices, a list or a "0,1" string names them; -1 and "auto" take every GPU
    there is (one process on CPUs).
    """
    devices = trainer.get("devices", 1)
    if OmegaConf.is_list(devices):
        return len(devices)
    if isinstance(devices, str) and "," in devices:  # GPU ids, as Lightning parses them
        return len([d for d in devices.split(",") if d.strip()])
    if devices in (-1, "-1", "auto"):
        on_gpu = str(trainer.get("accelerator", "auto")) in ("gpu", "cuda", "auto")
        return max(num_cuda_devices(), 1) if on_gpu else 1
    return int(devices)
