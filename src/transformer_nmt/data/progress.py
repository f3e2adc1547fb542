"""Progress of the data's long passes (reading, BPE training, encoding): a bar or log lines.

On a terminal a tqdm bar; elsewhere (a log file, a scheduler's output, `nohup`) a bar would be
hidden or print a line per refresh, so the same counts go to `logging` every `LOG_EVERY` seconds,
between a line as the pass starts and one as it ends.
"""

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from tqdm import tqdm

log = logging.getLogger(__name__)

# Often enough that a 10-minute preparation on a cluster shows it moves, rarely enough to stay
# a few lines in the job's log.
LOG_EVERY = 30.0  # seconds
ESTIMATE_FROM = 0.01  # the share of the total done before a line estimates the time left
HEARTBEAT_POLL = 1.0  # seconds between a heartbeat's looks at the clock: a line at most this late


def on_terminal() -> bool:
    """Whether stderr is a terminal, where bars are drawn."""
    return sys.stderr.isatty()


def progress(iterable: Iterable | None = None, **kwargs) -> "tqdm | LoggedProgress":
    """A tqdm bar on a terminal; a `LoggedProgress` anywhere else.

    Args:
        iterable: counted as it is iterated; without one, call `update(n)`.
        kwargs: `desc`, `total`, `unit`.
    """
    if on_terminal():
        return tqdm(iterable, dynamic_ncols=True, **kwargs)
    return LoggedProgress(iterable, **kwargs)


class LoggedProgress:
    """A pass's count, rate, elapsed time and time left, logged every `LOG_EVERY` seconds.

    Used as tqdm is: iterated (it ends with its iterable), updated by hand and closed, or as the
    context of a block that it closes.

    Args:
        iterable: counted as it is iterated.
        desc: names the pass in every line.
        total: the count at the end, when known: lines then give a share and the time left.
        unit: follows each count, e.g. " pairs".
        clock: seconds, for tests to drive.
    """

    def __init__(
        self,
        iterable: Iterable | None = None,
        desc: str = "",
        total: int | None = None,
        unit: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.iterable, self.desc, self.total, self.unit = iterable, desc, total, unit
        self.clock = clock
        self.n = 0
        self.counted_all = False  # the iterable ended, while the pass may go on
        self._lock = threading.Lock()  # a heartbeat thread logs beside the updating one
        self.start = self._last = clock()
        self.closed = False
        of = f" of {total:,}{unit}" if total is not None else ""
        log.info("%s: started%s", desc, of)

    def __iter__(self) -> Iterator:
        yield from self.count(self.iterable)
        self.close()

    def count(self, iterable: Iterable) -> Iterator:
        """Yield from `iterable`, counting each item, without closing at its end."""
        for item in iterable:
            yield item
            self.update()
        self.counted_all = True

    def update(self, n: int = 1) -> None:
        """Count `n` more; log a line if `LOG_EVERY` has passed since the last."""
        self.n += n
        self.poll()

    def poll(self) -> None:
        """Log a line if `LOG_EVERY` has passed since the last, whatever the count did."""
        with self._lock:
            now = self.clock()
            if self.closed or now - self._last < LOG_EVERY:
                return
            self._last = now
            log.info("%s: %s", self.desc, self._status(now))

    def close(self) -> None:
        """Log the end: the count, the time it took and the rate."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            elapsed = self.clock() - self.start
            log.info(
                "%s: done, %s%s in %s%s",
                self.desc,
                f"{self.n:,}",
                self.unit,
                tqdm.format_interval(elapsed),
                self._rate(elapsed),
            )

    def __enter__(self) -> "LoggedProgress":
        """Log every `LOG_EVERY` seconds from a thread too, while the block runs.

        For a pass that counts nothing for minutes, as the tokenizers trainer while it merges.
        """
        self._stop = threading.Event()
        self._beating = threading.Thread(target=self._beat, daemon=True)
        self._beating.start()
        return self

    def __exit__(self, exc_type: type | None, *rest: object) -> None:
        self._stop.set()
        self._beating.join()
        if exc_type is None:  # a pass that failed is not done
            self.close()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_POLL):
            self.poll()

    def _status(self, now: float) -> str:
        elapsed = now - self.start
        if self.counted_all:
            return f"all {self.n:,}{self.unit} read, {tqdm.format_interval(elapsed)} elapsed"
        count = f"{self.n:,}"
        if self.total:
            count += f"/{self.total:,}{self.unit} ({self.n / self.total:.0%})"
        else:
            count += self.unit
        status = f"{count}{self._rate(elapsed)}, {tqdm.format_interval(elapsed)} elapsed"
        # Sorted chunks (translation) arrive in bursts: the first item alone is no rate.
        if self.total and self.n >= self.total * ESTIMATE_FROM:
            left = (self.total - self.n) * elapsed / self.n
            status += f", {tqdm.format_interval(left)} left"
        return status

    def _rate(self, elapsed: float) -> str:
        if elapsed <= 0:
            return ""
        return f", {self.n / elapsed:,.0f}{self.unit}/s"


def size_text(nbytes: int) -> str:
    """A byte count for people: "1.2 MB"."""
    if nbytes < 1000:
        return f"{nbytes} B"
    size = nbytes / 1000
    for unit in ("kB", "MB"):
        if size < 1000:
            return f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"
