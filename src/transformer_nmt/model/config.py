"""What every family's config shares: `to_dict`/`from_dict` for checkpoints, and choice checks."""

from dataclasses import asdict, fields
from typing import Any, ClassVar

TIE_EMBEDDINGS = ("all", "decoder", "none")


class DataclassConfig:
    """`to_dict` and `from_dict` for a dataclass config whose class sets `family`."""

    family: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """Plain values (checkpoints load with `weights_only=True`) and the family."""
        return {"family": self.family, **asdict(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "DataclassConfig":
        """The config a checkpoint stored; unknown keys are an error, not silently dropped.

        A dict without "family" is taken as this family's, as checkpoints from before families.
        """
        values = dict(values)
        family = values.pop("family", cls.family)
        if family != cls.family:
            raise ValueError(f"settings of a {family} model, not of a {cls.family} model")
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown {cls.family} settings {sorted(unknown)}")
        return cls(**values)


def choice_problems(settings: dict[str, Any], choices: dict[str, tuple[str, ...]]) -> list[str]:
    """Each setting whose value is not among its choices; a missing one takes the first choice."""
    problems = []
    for key, allowed in choices.items():
        value = settings.get(key, allowed[0])
        if value not in allowed:
            problems.append(f"model.{key}={value!r} must be one of {', '.join(allowed)}")
    return problems
