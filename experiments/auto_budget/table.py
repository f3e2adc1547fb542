"""The update `data.max_tokens=auto` plans on N GPUs: tokens a rank, accumulation, tokens a side.

Arithmetic only, as training plans it (`per_rank_cap`, `largest_budget`, `plan_update`): WMT14
(`data.max_len=256`, the longest pair 257 tokens with EOS) at `--tokens-per-update`, on a GPU
whose memory holds any budget, or with `--rows N` the worst batch of N longest pairs at most.
"""

import argparse

from transformer_nmt.data.token_budget import largest_budget
from transformer_nmt.training.plan.batch_size import per_rank_cap, plan_update

LONGEST = 257


def table(tokens_per_update: int, rows: int | None, world_sizes: list[int]) -> list[str]:
    """Markdown rows: GPUs, tokens per rank, accumulation, tokens per update."""
    lines = ["| GPUs | tokens a rank | accumulation | tokens per update |", "|---|---|---|---|"]
    for world_size in world_sizes:
        cap = per_rank_cap(tokens_per_update, world_size, LONGEST)
        measured = largest_budget(
            lambda budget: rows is None or budget // LONGEST <= rows, LONGEST, cap
        )
        plan = plan_update(tokens_per_update, measured, world_size, LONGEST)
        lines.append(
            f"| {world_size} | {plan.max_tokens:,} | {plan.accumulate_grad_batches} "
            f"| {plan.tokens_per_update:,} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens-per-update", type=int, default=25_000)
    parser.add_argument("--rows", type=int, help="longest pairs the memory holds (default: any)")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 3, 6, 7, 16, 64])
    args = parser.parse_args()
    print("\n".join(table(args.tokens_per_update, args.rows, args.gpus)))


if __name__ == "__main__":
    main()
