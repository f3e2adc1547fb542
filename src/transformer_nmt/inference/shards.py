"""Translating (or scoring) one input in N processes (N CPU processes, or one a GPU), in input
order.

The input is cut as `Translator.stream` (and `score_stream`) cuts it, into chunks of
`chunk_size` sentences that are sorted and batched alone; chunk k goes to process k mod N. Each
chunk is thus decoded in exactly the batches one process would decode it in, with the same
sampling seeds and line numbers, so the output is one process's, byte for byte (given the same
intra-op threads a process, whose count may change a float sum's order).
"""

import multiprocessing as mp
import queue
from collections.abc import Callable, Iterator
from typing import Any

import torch

from transformer_nmt.inference.scoring import TargetScore
from transformer_nmt.inference.translator import Scored, Translator, chunk_size

# A shard's translator, built in its process from the device it runs on; picklable (a function
# of the module, or a functools.partial of one) so that a spawned process can receive it.
MakeTranslator = Callable[[str], Translator]


def translate_sharded(
    make: MakeTranslator,
    devices: list[str],
    sentences: list[str],
    options: dict[str, Any],
    per_sentence: dict[str, list] | None = None,
    threads: int | None = None,
    method: str = "stream",
    first_index: int = 0,
) -> Iterator[Scored] | Iterator[TargetScore]:
    """Each sentence's n-best (or score), in input order, decoded by one process a device.

    Args:
        make: builds a shard's translator on the device it is given.
        devices: one process each, e.g. ["cpu", "cpu"] or ["cuda:0", "cuda:1"].
        sentences: the whole input.
        options: the method's keyword arguments (search, batching, sampling).
        per_sentence: the method's per-sentence inputs by name ("prefixes", "constraints";
            "targets" to score), each a list as long as `sentences`.
        threads: torch intra-op threads of each process; None: torch's default.
        method: "stream" translates, "score_stream" scores (forced decoding).
        first_index: the index of sentences[0] in a larger input, whose samples and line
            numbers are then those of that input.
    """
    size = chunk_size(options.get("batch_size", 64), options.get("max_tokens"), options.get("mbr"))
    starts = list(range(0, len(sentences), size))
    per_sentence = per_sentence or {}
    work: list[list[tuple]] = [[] for _ in devices]
    for k, start in enumerate(starts):
        extra = {name: items[start : start + size] for name, items in per_sentence.items()}
        part = sentences[start : start + size]
        work[k % len(devices)].append((k, first_index + start, part, extra))
    context = mp.get_context("spawn")  # CUDA and torch's threads survive no fork
    results = context.Queue()
    processes = [
        context.Process(
            target=_shard,
            args=(make, device, chunks, (method, options), threads, results),
            daemon=True,
        )
        for device, chunks in zip(devices, work, strict=True)
        if chunks
    ]
    for process in processes:
        process.start()
    try:
        yield from _in_order(results, len(starts), processes)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
            process.join()


def _in_order(results: "mp.Queue", chunks: int, processes: list) -> Iterator[Scored]:
    """The chunks' results as the processes send them back, reordered into input order."""
    waiting: dict[int, list[Scored]] = {}
    for k in range(chunks):
        while k not in waiting:
            try:
                done, found = results.get(timeout=1.0)
            except queue.Empty:  # look whether a process died without a word
                if any(p.exitcode not in (None, 0) for p in processes):
                    raise ValueError("a shard's process died; its error is above") from None
                continue
            if isinstance(found, str):  # the shard's error, which names its line if it has one
                raise ValueError(found)
            waiting[done] = found
        yield from waiting.pop(k)


def _shard(
    make: MakeTranslator,
    device: str,
    chunks: list[tuple],
    call: tuple[str, dict[str, Any]],
    threads: int | None,
    results: "mp.Queue",
) -> None:
    """A shard's process: decode its chunks, send each chunk's results (or its error).

    call: the translator's method and its keyword arguments.
    """
    if threads is not None:
        torch.set_num_threads(threads)
    k = chunks[0][0]
    method, options = call
    try:
        decode = getattr(make(device), method)
        for k, start, sentences, extra in chunks:
            results.put((k, list(decode(sentences, start=start, **options, **extra))))
    except Exception as e:  # sent to the parent, which stops with it
        results.put((k, f"{type(e).__name__}: {e}"))
