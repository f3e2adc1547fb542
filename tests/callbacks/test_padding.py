import torch

from transformer_nmt.callbacks.padding import PaddingShare, pad_share
from transformer_nmt.data.tokenizer import PAD_ID


class RecordingModule:
    def __init__(self) -> None:
        self.logged: dict[str, float] = {}

    def log(self, name: str, value: float) -> None:
        self.logged[name] = value


def test_logs_the_padding_share_of_source_and_target():
    p = PAD_ID
    batch = {
        "src": torch.tensor([[5, 6, 7, 8], [5, p, p, p]]),  # 3 of 8 padding
        "tgt_out": torch.tensor([[5, 6], [7, 8]]),  # none
    }
    module = RecordingModule()
    PaddingShare().on_train_batch_end(None, module, None, batch, 0)
    assert module.logged == {"train/src_pad_share": 3 / 8, "train/tgt_pad_share": 0.0}


def test_pad_share_of_all_padding_is_one():
    assert pad_share(torch.full((3, 2), PAD_ID)) == 1.0
