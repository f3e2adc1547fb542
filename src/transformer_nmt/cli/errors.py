"""How a command ends on an error raised on purpose: its message, not a traceback above it."""

import functools
from collections.abc import Callable
from typing import TypeVar

Main = TypeVar("Main", bound=Callable[..., None])


def exits_on(*errors: type[Exception]) -> Callable[[Main], Main]:
    """Decorates a command's `main`: `errors`, whose messages say what is wrong and what to do,
    end it with `error: <message>` on stderr and status 1; any other error is a bug and keeps
    its traceback."""

    def decorate(main: Main) -> Main:
        @functools.wraps(main)
        def guarded(*args, **kwargs) -> None:
            try:
                main(*args, **kwargs)
            except errors as error:
                raise SystemExit(f"error: {error}") from None

        return guarded  # type: ignore[return-value]

    return decorate
