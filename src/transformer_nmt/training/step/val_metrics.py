"""The validation metrics a run can compute and monitor: their names, and which way is better.

`module.val_metrics` lists the scores validation computes (`bleu`, `chrf`, `chrf++`, `ter`);
`module.monitor` names the one metric the run is judged by: the checkpoint policy keeps the best
by it, the sweeper optimises it and early stopping waits for it to improve. A monitor is a score
(`ter`), a direction's score in a multilingual run (`bleu/de-fr`), or `loss`, logged as `val/` and
its name (`val/ter`, `val/bleu/de-fr`, `val/loss`).
"""

from collections.abc import Callable, Sequence
from functools import partial
from typing import Literal

from torchmetrics import Metric

from transformer_nmt.training.step.bleu import SacreBLEU, SacreCHRF, SacreTER

SCORES: dict[str, Callable[[], Metric]] = {
    "bleu": SacreBLEU,
    "chrf": SacreCHRF,
    "chrf++": partial(SacreCHRF, word_order=2),
    "ter": SacreTER,
}
# Every validation logs these whatever val_metrics says (TranslationModule).
ALWAYS = ("loss", "ppl")
LOWER_IS_BETTER = frozenset({"ter", "loss", "ppl"})
PREFIX = "val/"
SPLITS = ("val", "train", "test")


def score_of(monitor: str) -> str:
    """The metric a monitor names, without split and direction: `val/bleu/de-fr` -> `bleu`."""
    parts = monitor.split("/")
    return parts[1] if parts[0] in SPLITS and len(parts) > 1 else parts[0]


def logged_name(monitor: str) -> str:
    """The name the monitored metric is logged under: `ter` -> `val/ter`."""
    return monitor if monitor.startswith(PREFIX) else PREFIX + monitor


def mode(monitor: str) -> Literal["min", "max"] | None:
    """Whether a lower (`min`: TER, loss) or higher (`max`: BLEU, chrF) value is better; None
    for a metric not known here."""
    score = score_of(monitor)
    if score in LOWER_IS_BETTER:
        return "min"
    return "max" if score in SCORES else None


def direction(monitor: str) -> Literal["minimize", "maximize"] | None:
    """`mode` in Optuna's words."""
    return {"min": "minimize", "max": "maximize", None: None}[mode(monitor)]


def computed_scores(val_metrics: Sequence[str], monitor: str) -> list[str]:
    """The scores validation computes: those listed, and the monitored one if it is a score."""
    names = list(dict.fromkeys(val_metrics))
    if score_of(monitor) in SCORES and score_of(monitor) not in names:
        names.append(score_of(monitor))
    return names


def metric_problems(
    val_metrics: Sequence[str], monitor: str, directions: Sequence[str] | None = None
) -> list[str]:
    """Unknown names in `module.val_metrics` or `module.monitor`, or a direction the run lacks.

    `directions`: a multilingual run's (`de-fr`, ...); None for one direction.
    """
    known = ", ".join(SCORES)
    problems = [
        f"module.val_metrics names {name!r}: validation computes {known}"
        for name in val_metrics
        if name not in SCORES
    ]
    if monitor.startswith(PREFIX):
        return [*problems, f"module.monitor={monitor}: without {PREFIX}, e.g. module.monitor=ter"]
    score, _, where = monitor.partition("/")
    if score not in SCORES and score not in ALWAYS:
        problems.append(
            f"module.monitor={monitor}: monitor one of {known}, {', '.join(ALWAYS)}, or a "
            "direction's score such as bleu/de-fr"
        )
    elif where and score in ALWAYS:
        problems.append(f"module.monitor={monitor}: {score} is of all directions: monitor {score}")
    elif where and directions is None:
        problems.append(
            f"module.monitor={monitor} names a direction, but this run translates one: "
            f"monitor {score}"
        )
    elif where and where not in directions:
        problems.append(
            f"module.monitor={monitor}: this run's directions are {', '.join(directions)}"
        )
    return problems
