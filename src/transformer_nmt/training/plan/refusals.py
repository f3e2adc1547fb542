"""A failure before the first step, met on one rank, ends every rank with its cause.

A rank that stops alone leaves the others waiting for it: for its plan, or in a collective
(NCCL reports nothing until `ddp_timeout_minutes`). So global rank 0 hands its refusal over with
its plan (`plan_sharing`), and a step every rank takes as fit sets up (the budget probe) is
followed by an agreement on its outcome (`on_every_rank`).
"""

from collections.abc import Callable
from typing import TypeVar

import torch.distributed as dist

T = TypeVar("T")


class RankRefused(RuntimeError):
    """Another rank stopped the run before its first step; the message names it and why."""


def cause(error: BaseException) -> str:
    """An error as one rank tells the others: its type and message."""
    return f"{type(error).__name__}: {error}"


def on_every_rank(what: str, action: Callable[[], T]) -> T:
    """`action()`'s result, once every rank has run its own: if it raised on any rank, every
    rank raises, that rank its own error, the others `RankRefused` naming it and its cause.

    Args:
        what: the step, for people ("measuring data.max_tokens=auto").
        action: this rank's own work, with no collective inside: a rank that raised before
            reaching it would leave the others there.
    """
    try:
        result, failure = action(), None
    except Exception as error:
        result, failure = None, error
    if not (dist.is_available() and dist.is_initialized()):
        if failure is not None:
            raise failure
        return result
    causes: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(causes, None if failure is None else cause(failure))
    if failure is not None:
        raise failure
    failed = [(rank, told) for rank, told in enumerate(causes) if told is not None]
    if failed:
        rank, told = failed[0]
        raise RankRefused(f"global rank {rank} failed {what}, so every rank stops: {told}")
    return result
