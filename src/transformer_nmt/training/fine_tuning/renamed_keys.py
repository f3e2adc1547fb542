"""Fine-tuning's settings before they became the `init` config group: each refused by name."""

from collections.abc import Iterable

# The old top-level key, and the key of the `init` group (conf/init/) that replaced it.
RENAMED = {
    f"init_{name}": f"init.{name}"
    for name in ("from", "average_last", "keep", "freeze", "extend_vocab")
}


def renamed_problem(keys: Iterable[str]) -> str | None:
    """One line naming each old key among `keys` and the key to write instead."""
    old = [key for key in keys if key in RENAMED]
    if not old:
        return None
    return (
        f"{', '.join(old)}: renamed to {', '.join(RENAMED[key] for key in old)} (the init "
        "config group, conf/init/); write e.g. init.from=<checkpoint> init.keep=[step]"
    )


def override_keys(arguments: Iterable[str]) -> list[str]:
    """The keys command-line overrides set: `+init_from=x` and `init_from=x` set init_from."""
    return [argument.split("=", 1)[0].lstrip("+~") for argument in arguments if "=" in argument]
