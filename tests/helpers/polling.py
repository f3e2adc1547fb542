"""Waiting on what another process does: look again until it is there, or fail past a deadline.

No guess at how long it takes: a test waits for the event itself, as long as a loaded machine
needs, and a timeout only ends a test that would otherwise hang.
"""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(
    probe: Callable[[], T], timeout: float, what: Callable[[], str], interval: float = 0.05
) -> T:
    """probe()'s first truthy value; TimeoutError saying what() past `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"after {timeout} s: {what()}")
        time.sleep(interval)
    return value
