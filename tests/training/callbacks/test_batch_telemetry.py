from pathlib import Path

import pytest
import torch

from transformer_nmt.data.batching import collate
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID
from transformer_nmt.training.callbacks import batch_telemetry
from transformer_nmt.training.callbacks.batch_telemetry import BatchTelemetry, pad_share, rss_gb


class RecordingModule:
    device = torch.device("cpu")

    def __init__(self) -> None:
        self.logged: dict[str, float] = {}
        self.reduced: dict[str, str] = {}

    def log(self, name: str, value: torch.Tensor, reduce_fx: str = "mean", **kwargs) -> None:
        self.logged[name] = float(value)
        if kwargs.get("sync_dist"):
            self.reduced[name] = reduce_fx


def test_logs_tokens_per_second_since_the_last_logging_step_and_padding_shares(monkeypatch):
    examples = [{"src": [5, 6, 7, EOS_ID], "tgt": [8, 9, 10]}, {"src": [5, EOS_ID], "tgt": [11]}]
    batch = collate(examples, PAD_ID, pad_to_multiple_of=1)  # src 2 of 8 pad, tgt_out 2 of 8
    clock = iter([10.0, 12.0, 13.0, 14.0])
    monkeypatch.setattr("time.perf_counter", lambda: next(clock))
    logging_steps = iter([True, False, True, True])
    monkeypatch.setattr(batch_telemetry, "is_logging_step", lambda trainer: next(logging_steps))
    module, telemetry = RecordingModule(), BatchTelemetry()

    telemetry.on_train_batch_end(None, module, None, batch, 0)
    assert "train/tokens_per_sec" not in module.logged  # no interval before the first batch
    assert module.logged["train/src_pad_share"] == 2 / 8
    assert module.logged["train/tgt_pad_share"] == 2 / 8
    telemetry.on_train_batch_end(None, module, None, batch, 1)  # not a logging step
    assert "train/tokens_per_sec" not in module.logged
    telemetry.on_train_batch_end(None, module, None, batch, 2)
    # 4 + 2 targets incl. EOS per batch, two batches in the 3 s since the first one ended.
    assert module.logged["train/tokens_per_sec"] == 12 / 3.0
    assert module.logged["train/tokens_per_sec_global"] == 12 / 3.0  # summed over one rank
    assert module.reduced == {"train/tokens_per_sec_global": "sum"}
    telemetry.on_train_batch_end(None, module, None, batch, 3)
    assert module.logged["train/tokens_per_sec"] == 6 / 1.0  # the window restarts when logged


def test_validation_restarts_the_window(monkeypatch):
    batch = collate([{"src": [5, EOS_ID], "tgt": [11]}], PAD_ID)
    clock = iter([10.0, 50.0, 52.0])
    monkeypatch.setattr("time.perf_counter", lambda: next(clock))
    monkeypatch.setattr(batch_telemetry, "is_logging_step", lambda trainer: True)
    module, telemetry = RecordingModule(), BatchTelemetry()
    telemetry.on_train_batch_end(None, module, None, batch, 0)
    telemetry.on_validation_end(None, module)
    telemetry.on_train_batch_end(None, module, None, batch, 1)
    assert "train/tokens_per_sec" not in module.logged
    telemetry.on_train_batch_end(None, module, None, batch, 2)
    assert module.logged["train/tokens_per_sec"] == 2 / 2.0  # not over the 40 s of validation


def test_pad_share_of_all_padding_is_one():
    assert pad_share(torch.full((3, 2), PAD_ID)) == 1.0


def vm_rss_gb() -> float:
    """VmRSS of /proc/self/status: the kernel's other account of the resident set."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**20  # kB


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="no /proc: not Linux")
def test_logs_the_resident_memory_of_this_process_on_logging_steps(monkeypatch):
    batch = collate([{"src": [5, EOS_ID], "tgt": [11]}], PAD_ID)
    logging_steps = iter([False, True])
    monkeypatch.setattr(batch_telemetry, "is_logging_step", lambda trainer: next(logging_steps))
    module, telemetry = RecordingModule(), BatchTelemetry()
    telemetry.on_train_batch_end(None, module, None, batch, 0)
    assert "train/rss_gb" not in module.logged
    before = rss_gb()
    ballast = torch.ones(2**27, dtype=torch.uint8)  # 128 MiB, every page written
    telemetry.on_train_batch_end(None, module, None, batch, 1)
    assert module.logged["train/rss_gb"] >= before + 0.125 * 0.98
    assert module.logged["train/rss_gb"] == pytest.approx(vm_rss_gb(), abs=0.01)
    del ballast


def test_resident_memory_is_none_without_proc(tmp_path):
    assert rss_gb(tmp_path / "statm") is None
