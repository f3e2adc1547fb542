"""Fixtures shared by every test folder."""

import pytest
import torch

# CUDA runs where a GPU exists and shows as skipped elsewhere: a CPU-only run says what it left out.
DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    ),
]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each device the test should hold on: the CPU always, CUDA where available."""
    return torch.device(request.param)
