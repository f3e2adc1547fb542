import json

import lightning as L
import pytest
import torch

from helpers.toy_datamodule import make_datamodule
from transformer_nmt.data.bpe_dropout import BPEDropout
from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID
from transformer_nmt.training.callbacks.checkpoint_policy import CheckpointPolicy


@pytest.fixture
def fitted(tmp_path) -> TranslationDataModule:
    dm = make_datamodule(tmp_path)
    dm.setup("fit")
    return dm


def sides(dataset, side: str) -> list[list[int]]:
    return [seq.tolist() for seq in getattr(dataset, side)]


def test_each_sample_segments_the_same_texts_anew(fitted):
    usual = fitted.datasets["train"]
    dropout = BPEDropout(usual, fitted.tokenizer, p=0.3, max_len=32)
    first, second = dropout.sample(), dropout.sample()
    for side in ("src", "tgt"):
        texts = fitted.tokenizer.decode_batch(sides(usual, side))
        for sample in (first, second):
            assert fitted.tokenizer.decode_batch(sides(sample, side)) == texts
            # Dropped merges leave more, shorter tokens.
            assert getattr(sample, side).lengths().sum() > getattr(usual, side).lengths().sum()
        assert sides(first, side) != sides(second, side)
        # The run's own tokenizer, which checkpoints carry, still encodes the usual way.
        assert fitted.tokenizer.encode_batch(texts) == sides(usual, side)


def test_without_dropout_a_sample_is_the_usual_segmentation(fitted):
    usual = fitted.datasets["train"]
    sample = BPEDropout(usual, fitted.tokenizer, p=0.0, max_len=32).sample()
    for side in ("src", "tgt"):
        assert sides(sample, side) == sides(usual, side)


def test_a_side_sampled_longer_than_max_len_keeps_its_usual_segmentation(fitted):
    usual = fitted.datasets["train"]
    max_len = int(max(usual.src.lengths().max(), usual.tgt.lengths().max()))
    sample = BPEDropout(usual, fitted.tokenizer, p=0.9, max_len=max_len).sample()
    kept = 0
    for side in ("src", "tgt"):
        for old, new in zip(sides(usual, side), sides(sample, side), strict=True):
            assert len(new) <= max_len
            kept += new == old
    assert kept  # at p = 0.9 the longest sentences come out longer than max_len


def test_a_probability_outside_zero_to_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"data.bpe_dropout=1.0 must lie in \[0, 1\)"):
        make_datamodule(tmp_path, bpe_dropout=1.0)


class EpochRecorder(L.LightningModule):
    """Writes the source ids of every pair it trains on, by epoch, to `rank<r>.json`."""

    def __init__(self, folder):
        super().__init__()
        self.folder = folder
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list[list[int]]] = {}

    def training_step(self, batch, batch_idx):
        rows = self.seen.setdefault(self.current_epoch, [])
        rows += [[t for t in row if t not in (PAD_ID, EOS_ID)] for row in batch["src"].tolist()]
        return (self.weight * batch["src"].float().mean()).sum()

    def on_train_end(self):
        (self.folder / f"rank{self.global_rank}.json").write_text(json.dumps(self.seen))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def fit(folder, dm, ckpt_path=None, **trainer_args) -> list[dict[str, list[list[int]]]]:
    """Train `EpochRecorder` for 3 epochs, reloading the loader each epoch as `train` does."""
    settings = {
        "max_epochs": 3,
        "accelerator": "cpu",
        "logger": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "limit_val_batches": 0,
        "use_distributed_sampler": False,
        "reload_dataloaders_every_n_epochs": 1,
        "default_root_dir": folder,
    }
    trainer = L.Trainer(**{**settings, **trainer_args})
    trainer.fit(EpochRecorder(folder), datamodule=dm, ckpt_path=ckpt_path)
    return [json.loads(path.read_text()) for path in sorted(folder.glob("rank*.json"))]


def assert_every_pair_once_an_epoch_in_a_new_segmentation(dm, ranks, epochs=(0, 1, 2)) -> None:
    texts = sorted(dm.tokenizer.decode_batch(sides(dm.datasets["train"], "src")))
    trained = [[row for rank in ranks for row in rank[str(epoch)]] for epoch in epochs]
    for rows in trained:
        assert sorted(dm.tokenizer.decode_batch(rows)) == texts
    segmentations = [sorted(sides(dm.datasets["train"], "src")), *map(sorted, trained)]
    assert len({json.dumps(s) for s in segmentations}) == len(segmentations)


def test_every_epoch_trains_every_pair_once_in_its_own_segmentation(tmp_path):
    dm = make_datamodule(tmp_path, bpe_dropout=0.3)
    (seen,) = fit(tmp_path, dm)
    assert_every_pair_once_an_epoch_in_a_new_segmentation(dm, [seen])


def test_a_trainer_that_never_reloads_the_loader_is_refused(tmp_path):
    dm = make_datamodule(tmp_path, bpe_dropout=0.3)
    with pytest.raises(ValueError, match="reload_dataloaders_every_n_epochs=1"):
        fit(tmp_path, dm, reload_dataloaders_every_n_epochs=0)


@pytest.mark.slow
def test_ddp_ranks_split_one_segmentation_an_epoch(tmp_path):
    # Were each rank to draw its own, their batches would overlap and miss pairs, or differ in
    # number and hang.
    dm = make_datamodule(tmp_path, bpe_dropout=0.3)
    ranks = fit(tmp_path, dm, strategy="ddp_spawn", devices=2)
    assert len(ranks) == 2
    dm.setup("fit")
    assert_every_pair_once_an_epoch_in_a_new_segmentation(dm, ranks)


def test_a_run_resumed_mid_epoch_ends_that_epoch_then_trains_whole_ones(tmp_path):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    first.mkdir()
    resumed.mkdir()
    # Saved as update 3 ends, as the periodic checkpoint of a run that is then stopped.
    at_step_3 = CheckpointPolicy(
        str(first),
        monitor=None,
        every_n_steps=3,
        optimizer_state=True,  # to resume from
    )
    fit(first, make_datamodule(tmp_path, bpe_dropout=0.3), max_steps=4, callbacks=[at_step_3])
    dm = make_datamodule(tmp_path, bpe_dropout=0.3)
    (seen,) = fit(resumed, dm, ckpt_path=first / "step3.ckpt")
    assert 0 < len(seen["0"]) < len(dm.datasets["train"])  # the pairs of 3 batches skipped
    assert_every_pair_once_an_epoch_in_a_new_segmentation(dm, [seen], epochs=(1, 2))
