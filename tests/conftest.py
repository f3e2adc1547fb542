"""Fixtures shared by every test folder, and how the suite is spread over xdist workers."""

import os
from collections import Counter

import pytest
import torch

from helpers.slurm_cluster import slurm_cluster

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
        parser.addoption("--no-loadscope-reorder", dest="loadscopereorder", action="store_false")


# The files that run longest, longest first: a real SLURM cluster, PostgreSQL restarts and
# multi-process runs stopped and started again, minutes each on a 2-core runner.
LONGEST = (
    "training/test_sweep_faults.py",
    "test_slurm.py",
    "test_chaos.py",
    "test_interruption.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, then the others by their number of slow tests, most first.

    xdist hands out whole files in this order (pyproject's `--no-loadscope-reorder` keeps it,
    where xdist would sort files by their number of tests): the long ones start early and the
    two workers end together.
    """
    tests = config.rootpath / "tests"
    longest = {tests / name: rank for rank, name in enumerate(LONGEST)}
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: (longest.get(item.path, len(LONGEST)), -slow[item.path]))


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


@pytest.fixture(scope="session")
def cluster():
    """A real single-node SLURM (helpers/slurm_cluster.py), started once for every test that
    submits jobs; a test file skips where `missing_binaries()` names what the machine lacks."""
    with slurm_cluster() as running:
        yield running
