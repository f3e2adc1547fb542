"""Fixtures shared by the data tests."""

from pathlib import Path

import pytest

# CI clones the repo with shared/ beside it: <repo>/../shared/data/multi30k.
MULTI30K = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "multi30k"


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The real Multi30k text folder, or a skip when this machine lacks it."""
    if not MULTI30K.is_dir():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    return MULTI30K
