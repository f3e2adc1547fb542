import torch

from transformer_nmt.data.batching import collate
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID
from transformer_nmt.training.callbacks.batch_telemetry import BatchTelemetry, pad_share


class RecordingModule:
    def __init__(self) -> None:
        self.logged: dict[str, float] = {}

    def log(self, name: str, value: float, **kwargs) -> None:
        self.logged[name] = value


def test_logs_padding_shares_and_real_target_tokens_per_second(monkeypatch):
    examples = [{"src": [5, 6, 7, EOS_ID], "tgt": [8, 9, 10]}, {"src": [5, EOS_ID], "tgt": [11]}]
    batch = collate(examples, PAD_ID, pad_to_multiple_of=1)  # src 2 of 8 pad, tgt_out 2 of 8
    clock = iter([10.0, 12.0])
    monkeypatch.setattr("time.perf_counter", lambda: next(clock))
    module, telemetry = RecordingModule(), BatchTelemetry()
    telemetry.on_train_batch_end(None, module, None, batch, 0)
    assert "train/tokens_per_sec" not in module.logged  # no interval before the first batch
    telemetry.on_train_batch_end(None, module, None, batch, 1)
    assert module.logged["train/tokens_per_sec"] == 6 / 2.0  # 4 + 2 targets incl. EOS, in 2 s
    assert module.logged["train/src_pad_share"] == 2 / 8
    assert module.logged["train/tgt_pad_share"] == 2 / 8


def test_pad_share_of_all_padding_is_one():
    assert pad_share(torch.full((3, 2), PAD_ID)) == 1.0
