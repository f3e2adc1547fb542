"""experiments/common/timing.py: queued device work waited for, medians, runs alternating."""

import pytest
import torch

from experiments.common import timing


class Clock:
    """Stands in for perf_counter: time passes only when a run says how long it took."""

    def __init__(self, events: list[str]):
        self.now, self.events = 0.0, events

    def __call__(self) -> float:
        self.events.append("clock")
        return self.now

    def run(self, name: str, durations: list[float]):
        """A run that takes the next of `durations` each call."""
        left = iter(durations)

        def call() -> None:
            self.events.append(name)
            self.now += next(left)

        return call


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock([])
    monkeypatch.setattr(timing, "perf_counter", clock)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device: clock.events.append("sync"))
    return clock


def test_the_clock_reads_after_the_device_finished_the_work_before_and_in_the_run(clock):
    assert timing.seconds(clock.run("run", [2.5]), "cuda") == 2.5
    assert clock.events == ["sync", "clock", "run", "sync", "clock"]


def test_on_the_cpu_nothing_is_waited_for(clock):
    assert timing.seconds(clock.run("run", [1.0]), torch.device("cpu")) == 1.0
    assert clock.events == ["clock", "run", "clock"]


def test_median_seconds_is_the_median_of_the_timed_calls_after_the_warmup(clock):
    run = clock.run("run", [100.0, 3.0, 1.0, 2.0, 9.0])  # the first is the warm-up
    assert timing.median_seconds(run, repeats=4) == 2.5
    assert clock.events.count("run") == 5


def test_interleaved_alternates_the_runs_and_gives_each_its_median_per_call(clock):
    # One warm-up call each, then 3 repeats of 2 calls each.
    runs = {
        "a": clock.run("a", [50.0, 1.0, 1.0, 2.0, 2.0, 9.0, 9.0]),
        "b": clock.run("b", [50.0, 4.0, 6.0, 3.0, 3.0, 1.0, 1.0]),
    }
    assert timing.interleaved(runs, repeats=3, calls=2) == {"a": 2.0, "b": 3.0}
    calls = [event for event in clock.events if event in runs]
    assert calls == ["a", "b"] + ["a", "a", "b", "b"] * 3


def test_every_other_round_runs_in_reverse_order():
    names = ["ours", "torch", "marian"]
    assert [timing.round_order(names, r) for r in range(3)] == [names, names[::-1], names]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_timed_cuda_run_has_finished_when_the_time_is_read():
    x = torch.randn(2048, 2048, device="cuda")
    timing.seconds(lambda: [x @ x for _ in range(20)], "cuda")
    assert torch.cuda.current_stream().query()  # nothing left in the queue
