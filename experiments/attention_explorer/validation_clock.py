"""Wall seconds of each validation, and of named parts of the work done inside it.

A part is a callable the validation reaches through an attribute (a module's function, a
callback's method): `Stopwatch.watching` swaps in a timed wrapper and puts the original back.
"""

import functools
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import lightning as L


class Stopwatch:
    """Seconds spent in the watched callables, summed by name since the last `reset`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def reset(self) -> None:
        self.seconds.clear()

    @contextmanager
    def watching(self, name: str, owner: object, attribute: str) -> Iterator[None]:
        """Time every call of `owner.<attribute>` as `name` while inside the block."""
        original = getattr(owner, attribute)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start

        setattr(owner, attribute, timed)
        try:
            yield
        finally:
            setattr(owner, attribute, original)


class ValidationClock(L.Callback):
    """One record per validation (the sanity check's left out): its seconds, from the start
    hook to the end hook, and the stopwatch's parts within it.

    Add it after the trainer is built, so that it is the last callback and its end hook runs
    after every other callback's work at the end of a validation.
    """

    def __init__(self, stopwatch: Stopwatch) -> None:
        self.stopwatch = stopwatch
        self.validations: list[dict[str, float]] = []

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.stopwatch.reset()
        self._start = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            seconds = time.perf_counter() - self._start
            self.validations.append({"validation": seconds, **self.stopwatch.seconds})
