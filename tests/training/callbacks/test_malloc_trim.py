import ctypes

import pytest

from transformer_nmt.training.callbacks import malloc_trim
from transformer_nmt.training.callbacks.batch_telemetry import rss_gb
from transformer_nmt.training.callbacks.malloc_trim import MallocTrim, load_malloc_trim


def test_trims_after_every_validation_and_training_epoch_but_not_twice_in_a_row(monkeypatch):
    calls = []
    monkeypatch.setattr(malloc_trim, "load_malloc_trim", lambda: calls.append)
    callback = MallocTrim()
    callback.on_validation_end(None, None)
    assert calls == [0]  # pad 0: nothing kept at the heap's top
    callback.on_train_epoch_end(None, None)  # right after its validation: nothing to give back
    assert calls == [0]
    callback.on_train_batch_end(None, None, None, None, 0)
    callback.on_train_epoch_end(None, None)
    callback.on_validation_batch_end(None, None, None, None, 0)
    callback.on_validation_end(None, None)
    assert calls == [0, 0, 0]


def test_is_a_no_op_off_linux(monkeypatch):
    monkeypatch.setattr(malloc_trim.sys, "platform", "darwin")
    assert load_malloc_trim() is None
    MallocTrim().on_validation_end(None, None)  # nothing to call, nothing raised


@pytest.mark.skipif(load_malloc_trim() is None or rss_gb() is None, reason="not glibc on Linux")
def test_gives_the_pages_of_freed_heap_blocks_back():
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    size = 2**16  # under glibc's mmap threshold: from the heap, like most of a training step's
    blocks = [libc.malloc(size) for _ in range(2**11)]  # 128 MiB
    for block in blocks:
        ctypes.memset(block, 1, size)  # resident
    for block in blocks[:-1]:
        libc.free(block)  # the last block, above the others, keeps free() from trimming them
    before = rss_gb()
    MallocTrim().on_validation_end(None, None)
    after = rss_gb()
    libc.free(blocks[-1])
    assert before - after > 0.1  # of 0.125 GiB freed
