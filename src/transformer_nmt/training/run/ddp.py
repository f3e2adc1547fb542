"""DDP that ends when a rank is lost: the process-group timeout from the config."""

from datetime import timedelta

from lightning.pytorch.strategies import Strategy, StrategyRegistry


def ddp_strategy(strategy: str | Strategy, timeout_minutes: float) -> str | Strategy:
    """`trainer.strategy`, a DDP strategy named by Lightning's registry given `timeout_minutes`.

    A collective that a lost rank never joins fails after this long (NCCL's watchdog then ends
    the process; Gloo raises) instead of Lightning's 30 minutes or a hang. It must exceed the
    longest wait of the ranks on each other: rank 0 training the tokenizer and encoding the
    token store while the others wait at a barrier. Other strategies pass unchanged.
    """
    if not isinstance(strategy, str) or "ddp" not in strategy or strategy not in StrategyRegistry:
        return strategy
    entry = StrategyRegistry[strategy]
    return entry["strategy"](**entry["init_params"], timeout=timedelta(minutes=timeout_minutes))
