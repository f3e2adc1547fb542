"""The paper's learning-rate schedule (section 5.3)."""


def inverse_sqrt_warmup(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    `step` counts from 1, as in the paper: the first optimizer step already has a non-zero rate.
    """
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
