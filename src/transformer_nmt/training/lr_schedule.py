"""The paper's learning-rate schedule (section 5.3), and an optional linear cool-down."""


def inverse_sqrt_warmup(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    `step` counts from 1, as in the paper: the first optimizer step already has a non-zero rate.
    """
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def linear_cooldown(step: int, total_steps: int, cooldown_steps: int) -> float:
    """Multiplier that takes the rate linearly to zero over the last `cooldown_steps` updates.

    1 until then; update `total_steps - cooldown_steps + 1` gets 1 and the last update
    (`total_steps`, counted from 1 like `step`) gets 1 / cooldown_steps, so no update of the
    budget is wasted at a zero rate. Not in the paper: the cool-down of warm-up-stable-decay
    schedules, for runs whose budget is known in advance.
    """
    if cooldown_steps <= 0:
        return 1.0
    return max(0.0, min(1.0, (total_steps - step + 1) / cooldown_steps))


def cooldown_problem(cooldown_steps: int, max_steps: int) -> str | None:
    """Why `module.cooldown_steps` cannot run with `trainer.max_steps`, or None if it can."""
    if cooldown_steps == 0:
        return None
    if cooldown_steps < 0 or max_steps < cooldown_steps:
        return (
            f"module.cooldown_steps={cooldown_steps} needs trainer.max_steps >= it "
            f"(trainer.max_steps={max_steps}): the cool-down ends at trainer.max_steps; "
            "set both, or module.cooldown_steps=0"
        )
    return None
