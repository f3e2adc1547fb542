"""The learning rate of each update: the paper's schedule (section 5.3) and the cool-down.

The cool-down, not in the paper, is the one of warm-up-stable-decay schedules: the rate falls
linearly to zero over the last updates of the budget. A step budget places it in advance
(`module.cooldown_steps`); a time budget (`callbacks.timed_cooldown.minutes`) places it when
its last minutes begin, from the machine's pace (`cooldown_window`), since how many updates an
hour holds depends on the machine. A recipe with both budgets sets both, and the run ends at
whichever end comes first with its cool-down done: `LearningRate` applies every window it is
given, the lower multiplier winning.
"""

import math


def inverse_sqrt_warmup(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    `step` counts from 1, as in the paper: the first optimizer step already has a non-zero rate.
    `warmup_steps=0` means no warm-up: the rate starts at its peak and decays as step^-0.5.
    """
    step = max(step, 1)
    if warmup_steps == 0:
        return factor * d_model**-0.5 * step**-0.5
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def linear_cooldown(step: int, total_steps: int, cooldown_steps: int) -> float:
    """Multiplier that takes the rate linearly to zero over the last `cooldown_steps` updates.

    1 until then; update `total_steps - cooldown_steps + 1` gets 1 and the last update
    (`total_steps`, counted from 1 like `step`) gets 1 / cooldown_steps, so no update of the
    budget is wasted at a zero rate.
    """
    if cooldown_steps <= 0:
        return 1.0
    return max(0.0, min(1.0, (total_steps - step + 1) / cooldown_steps))


class LearningRate:
    """The rate of each update: `inverse_sqrt_warmup`, times the lowest `linear_cooldown` of the
    cool-down windows given (a step budget's and a time budget's: whichever ends first)."""

    def __init__(self, d_model: int, warmup_steps: int, factor: float = 1.0) -> None:
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.factor = factor
        self.windows: set[tuple[int, int]] = set()  # (last update, updates) of each cool-down

    def cool_down(self, last_step: int, steps: int) -> None:
        """Take the rate linearly to zero over updates `last_step - steps + 1` to `last_step`,
        or sooner where another window does."""
        self.windows.add((last_step, steps))

    def __call__(self, step: int) -> float:
        """The rate of update `step`, counted from 1 as in the paper."""
        paper = inverse_sqrt_warmup(step, self.d_model, self.warmup_steps, self.factor)
        return paper * min((linear_cooldown(step, *w) for w in self.windows), default=1.0)


def cooldown_window(step: int, left: float, pace: float) -> tuple[int, int]:
    """(last update, updates) of a cool-down starting after update `step` with `left` seconds
    of the budget remaining: as many updates as `pace` (updates a second) fits into what is
    left, at least one."""
    steps = max(1, math.floor(left * pace))
    return step + steps, steps


def warmup_problem(warmup_steps: int) -> str | None:
    """Why `module.warmup_steps` is no warm-up length, or None if it is one (0: none)."""
    if isinstance(warmup_steps, int) and warmup_steps >= 0:
        return None
    return (
        f"module.warmup_steps={warmup_steps} must be a count of updates: the paper's 4000, "
        "or 0 for no warm-up (the rate starts at its peak)"
    )


def schedule_problems(warmup_steps: int, cooldown_steps: int, max_steps: int) -> list[str]:
    """The `module` schedule settings (`warmup_steps`, `cooldown_steps`) that cannot run."""
    found = [warmup_problem(warmup_steps), cooldown_problem(cooldown_steps, max_steps)]
    return [problem for problem in found if problem]


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


def timed_cooldown_problems(
    setting: str, minutes: float, cooldown_steps: int, max_time: str | None
) -> list[str]:
    """Why a cool-down over the last `minutes` of `trainer.max_time` cannot run: no time
    budget. `setting` names the minutes' config key. Beside a step cool-down
    (`cooldown_steps`) it is the time budget's: the budget that ends first cools down."""
    if not minutes:
        return []
    problems = []
    if minutes < 0 or max_time is None:
        problems.append(
            f"{setting}={minutes} needs a positive number of minutes and trainer.max_time "
            f"(now {max_time}), whose last minutes it takes"
        )
    return problems
