"""Validation scores computed by two gloo ranks, each updating with its own share of sentences."""

import json
from pathlib import Path

import torch
import torch.distributed as dist

from transformer_nmt.training.step.val_metrics import SCORES


def score_on_rank(rank: int, world_size: int, folder: str, hyps: list, refs: list) -> None:
    """Updates every score with this rank's sentences (every world_size-th, in batches of 2) and
    writes what each computes, synced over the ranks, to `<folder>/rank<rank>.json`."""
    store = dist.FileStore(str(Path(folder) / "store"), world_size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    try:
        metrics = {name: make() for name, make in SCORES.items()}
        mine = list(range(rank, len(refs), world_size))
        for start in range(0, len(mine), 2):
            rows = mine[start : start + 2]
            for metric in metrics.values():
                metric.update([hyps[i] for i in rows], [refs[i] for i in rows])
        scores = {name: float(metric.compute()) for name, metric in metrics.items()}
        (Path(folder) / f"rank{rank}.json").write_text(json.dumps(scores))
    finally:
        dist.destroy_process_group()


def scores_of_ranks(folder: Path, world_size: int, hyps: list, refs: list) -> list[dict]:
    """What each of `world_size` gloo ranks computes (`score_on_rank`)."""
    args = (world_size, str(folder), hyps, refs)
    # Forked: a spawned rank would import torch and pytest's plugins again.
    torch.multiprocessing.start_processes(
        score_on_rank, args=args, nprocs=world_size, join=True, start_method="fork"
    )
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(world_size)]
