"""Fixtures shared by every test folder, and how the suite is spread over xdist workers."""

import os

import pytest
import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One intra-op thread per xdist worker (and the runs it starts): a thread per core, not two.
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("xdist"):
        # pyproject's addopts name xdist's options; without xdist (not installed, or -p no:xdist)
        # the suite runs serially.
        parser.addoption("--numprocesses", dest="numprocesses", default=None)
        parser.addoption("--dist", dest="dist", default="no")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with slow tests first: xdist hands out whole files, and the long ones start early."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


# CUDA runs where a GPU exists and shows as skipped elsewhere: a CPU-only run says what it left out.
DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    ),
]


@pytest.fixture
def one_thread():
    """Tiny models gain nothing from intra-op threads, which a busy machine makes costly."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each device the test should hold on: the CPU always, CUDA where available."""
    return torch.device(request.param)
