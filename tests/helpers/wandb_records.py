"""Reads an offline W&B run's `run-*.wandb` file: the records `wandb sync` would upload.

wandb 0.31 writes no `wandb-summary.json` offline and no longer ships a Python reader (the
Go core writes the file), so this parses the format itself: a 7-byte header (":W&B", 0xBEE1,
version 0), then LevelDB log blocks of 32 KiB whose chunks (crc32c 4 bytes, length 2 bytes
little-endian, type 1 byte: full, first, middle, last) carry serialized `Record` protobufs.
"""

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

from helpers.polling import poll

HEADER = b":W&B\xe1\xbe\x00"
BLOCK = 32768
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_records(path: Path, timeout: float = 60) -> list[wandb_internal_pb2.Record]:
    """The run's records once the file holds its last, `exit`: the Go core may still be
    writing them when `finish()` has returned."""

    def ended() -> list[wandb_internal_pb2.Record] | None:
        records = _parse(path)
        return records if any(r.HasField("exit") for r in records) else None

    return poll(ended, timeout, lambda: f"{path} has no exit record")


def _parse(path: Path) -> list[wandb_internal_pb2.Record]:
    """The whole records written so far."""
    data = path.read_bytes()
    assert HEADER.startswith(data[: len(HEADER)]), "not a W&B run file"
    records, pending, pos = [], b"", len(HEADER)
    while pos + CHUNK_HEADER <= len(data):
        if BLOCK - pos % BLOCK < CHUNK_HEADER:  # a block's tail too short for a chunk is padding
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + CHUNK_HEADER])
        chunk = data[pos + CHUNK_HEADER : pos + CHUNK_HEADER + length]
        pos += CHUNK_HEADER + length
        if kind == 0 or pos > len(data):  # zero padding at the end, or a chunk still being written
            break
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def _items(items) -> dict:
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in items}


def history(path: Path) -> list[dict]:
    """Every `wandb.log` row, values decoded from JSON."""
    return [_items(r.history.item) for r in read_records(path) if r.HasField("history")]


def summary(path: Path) -> dict:
    """The run summary as W&B holds it at the end: summary records applied in order."""
    out = {}
    for r in read_records(path):
        if r.HasField("summary"):
            out.update(_items(r.summary.update))
            for item in r.summary.remove:
                out.pop(item.key, None)
    return out


def metric_definitions(path: Path) -> dict[str, wandb_internal_pb2.MetricRecord]:
    """`define_metric` calls by metric name."""
    return {r.metric.name: r.metric for r in read_records(path) if r.HasField("metric")}


def run_record(path: Path) -> wandb_internal_pb2.RunRecord:
    """Name, tags and config of the run."""
    (run,) = [r.run for r in read_records(path) if r.HasField("run")]
    return run


def config(path: Path) -> dict:
    """The run config (here the resolved Hydra config), values decoded from JSON."""
    out = {}
    for r in read_records(path):
        if r.HasField("run") or r.HasField("config"):
            updates = r.run.config.update if r.HasField("run") else r.config.update
            out.update({item.key: json.loads(item.value_json) for item in updates})
    out.pop("_wandb", None)
    return out


def loss_curve(run_dir: Path) -> tuple[set[str], list[int]]:
    """The ids of the offline W&B runs of a run folder, and the steps their `train/loss` curve
    holds, row by row, start after start (`wandb sync` uploads the files of one run in that
    order)."""
    ids, starts = loss_rows(run_dir)
    return ids, [step for rows in starts for step, _ in rows]


def losses_by_start(run_dir: Path) -> tuple[set[str], list[dict[int, float]]]:
    """The ids of the offline W&B runs of a run folder, and each start's `train/loss` by step,
    the starts in order."""
    ids, starts = loss_rows(run_dir)
    return ids, [dict(rows) for rows in starts]


def loss_rows(run_dir: Path) -> tuple[set[str], list[list[tuple[int, float]]]]:
    """The ids of the offline W&B runs of a run folder, and each start's `train/loss` rows as
    (step, loss), the starts in order.

    An earlier start's file is read as it is: that start has ended, and its file lacks the exit
    record where a scheduler's SIGTERM ended W&B's service first.
    """
    *earlier, last = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))  # by their start
    ids, starts = set(), []
    for records in [*(_parse(f) for f in earlier), read_records(last)]:
        ids |= {r.run.run_id for r in records if r.HasField("run")}
        rows = [_items(r.history.item) for r in records if r.HasField("history")]
        starts.append(
            [(row["trainer/global_step"], row["train/loss"]) for row in rows if "train/loss" in row]
        )
    return ids, starts


# W&B's service writes what it holds to the run's file every `x_transaction_log_flush_interval`
# (15 s by default), and loses the rest when a SIGTERM ends it: a run with this environment writes
# every second, so that a test waits a second, not 15, for a step to be on disk.
FLUSH_EVERY_SECOND = {"WANDB__TRANSACTION_LOG_FLUSH_INTERVAL": "1"}


def wait_until_written(run_dir: Path, step: int, timeout: float = 120) -> None:
    """Until W&B's service has written a row of `step` to the run folder's offline file (see
    FLUSH_EVERY_SECOND)."""

    def written() -> bool:
        files = run_dir.glob("wandb/offline-run-*/run-*.wandb")
        rows = [_items(r.history.item) for f in files for r in _parse(f) if r.HasField("history")]
        return any(row.get("trainer/global_step") == step for row in rows)

    poll(written, timeout, lambda: f"no row of step {step} in {run_dir}/wandb")
