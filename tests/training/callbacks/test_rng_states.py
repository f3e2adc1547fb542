"""The random generators' states: saved as plain tensors and tuples, and put back exactly."""

import io
import random

import numpy as np
import torch

from transformer_nmt.training.callbacks.rng_states import rng_states, set_rng_states


def draws() -> tuple:
    cuda = torch.rand(3, device="cuda").tolist() if torch.cuda.is_available() else None
    return (
        torch.rand(3).tolist(),
        cuda,
        np.random.rand(3).tolist(),
        random.random(),
        np.random.randn(),
    )


def test_the_states_load_with_weights_only_and_repeat_every_generators_draws():
    if torch.cuda.is_available():
        torch.cuda.init()  # a run's CUDA is initialised before a checkpoint is saved
    np.random.randn()  # NumPy now holds a cached Gaussian, part of its state
    buffer = io.BytesIO()
    torch.save({"ranks": [rng_states()]}, buffer)
    expected = draws()
    draws()  # the generators move on
    buffer.seek(0)
    set_rng_states(torch.load(buffer, weights_only=True)["ranks"][0])
    assert draws() == expected
