"""The search space: Hydra's sweep overrides as Optuna distributions, and the one a study keeps.

`choice(a, b)` is categorical; `range(lo, hi, step=s)` an integer (or float) grid from lo to hi;
`interval(lo, hi)` a uniform float (an int if both ends are), `tag(log, interval(lo, hi))` a
log-uniform one. Any other value is fixed: passed to every trial as it is.
"""

import json

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, Transformer
from hydra.errors import CompactHydraException
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
    distribution_to_json,
)

# The study's user attribute that keeps its search space, as distribution JSON by name.
SEARCH_SPACE = "search_space"


class SearchSpaceChanged(CompactHydraException, ValueError):
    """A stored study is asked to go on over a different search space: Hydra prints the message,
    which says what to do, without a traceback."""


def search_space(arguments: list[str]) -> tuple[dict[str, BaseDistribution], dict[str, str]]:
    """The searched parameters' distributions and the fixed parameters' values, by name.

    A later argument wins over an earlier one of the same name: the command line's over the
    config's `params`.
    """
    space, fixed = {}, {}
    for override in OverridesParser.create().parse_overrides(arguments):
        name = override.get_key_element()
        space.pop(name, None)
        fixed.pop(name, None)
        if override.is_sweep_override():
            space[name] = _distribution(override)
        else:
            fixed[name] = override.get_value_element_as_str()
    return space, fixed


def _distribution(override: Override) -> BaseDistribution:
    value = override.value()
    if override.is_choice_sweep() or (override.is_range_sweep() and value.shuffle):
        return CategoricalDistribution(list(override.sweep_iterator(Transformer.encode)))
    if override.is_range_sweep():
        numbers = (value.start, value.stop, value.step)
        if any(isinstance(x, float) for x in numbers):
            return FloatDistribution(value.start, value.stop, step=value.step)
        return IntDistribution(int(value.start), int(value.stop), step=int(value.step))
    if override.is_interval_sweep():
        log = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(value.start, value.end, log=log)
        return FloatDistribution(value.start, value.end, log=log)
    raise ValueError(f"{override.input_line}: Optuna cannot search this sweep")


def keep_search_space(study: optuna.Study, space: dict[str, BaseDistribution]) -> None:
    """Stores the space in a new study; raises `SearchSpaceChanged` if a stored one differs.

    Optuna itself accepts any parameters in any trial, so a study name reused for another search
    would silently mix two searches' trials in one ranking.
    """
    wanted = {name: distribution_to_json(d) for name, d in space.items()}
    stored = study.user_attrs.get(SEARCH_SPACE)
    if stored is None:
        study.set_user_attr(SEARCH_SPACE, wanted)
        # Read back: of two workers creating the study at once, a database keeps the first's.
        stored = study.user_attrs[SEARCH_SPACE]
    if stored == wanted:
        return
    changed = sorted(
        name for name in stored.keys() | wanted.keys() if stored.get(name) != wanted.get(name)
    )
    lines = [
        f"  {name}: stored {_shown(stored, name)}, asked {_shown(wanted, name)}" for name in changed
    ]
    raise SearchSpaceChanged(
        f"study {study.study_name} was searched over another space:\n" + "\n".join(lines) + "\n"
        "Give the new search its own hydra.sweeper.study_name (a new study, in a new sweep "
        "folder), or run this study with its stored space."
    )


def _shown(space: dict[str, str], name: str) -> str:
    if name not in space:
        return "(not searched)"
    return str(json.loads(space[name])["attributes"])
