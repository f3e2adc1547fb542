import lightning as L
import pytest
import torch

from helpers.toy_datamodule import make_datamodule
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, BPETokenizer


def test_max_tokens_too_small_for_max_len_is_refused(tmp_path):
    with pytest.raises(ValueError, match="max_tokens=100 .* max_len=100"):
        make_datamodule(tmp_path, max_tokens=100, max_len=100)


def test_hyperparameters_are_saved_without_the_corpus(tmp_path):
    dm = make_datamodule(tmp_path)
    assert dm.hparams.vocab_size == 1000
    assert dm.hparams.src_lang == "en"
    assert "corpus" not in dm.hparams


def test_prepare_data_caches_the_tokenizer_for_the_next_run(tmp_path, monkeypatch):
    dm = make_datamodule(tmp_path)
    dm.prepare_data()
    cached = sorted(p.name.split("-")[0] for p in (tmp_path / "cache").iterdir())
    assert cached == ["bpe", "tokens", "tokens"]  # the tokenizer, the train and val stores
    assert dm.load_tokenizer() is dm.load_tokenizer()

    def no_training(*args, **kwargs):
        raise AssertionError("trained although a cached tokenizer fits")

    monkeypatch.setattr(BPETokenizer, "train", no_training)
    assert make_datamodule(tmp_path).load_tokenizer().to_str() == dm.load_tokenizer().to_str()


def test_train_batches_fit_the_budget_and_are_shaped_for_teacher_forcing(tmp_path):
    dm = make_datamodule(tmp_path)
    dm.prepare_data()
    dm.setup("fit")
    assert set(dm.datasets) == {"train", "val"}
    assert len(dm.datasets["train"]) == 300
    loader = dm.train_dataloader()
    batches = list(loader)
    assert len(batches) == len(loader)
    assert sum(len(b["src"]) for b in batches) == 300
    for batch in batches:
        (b, s), (b_in, t) = batch["src"].shape, batch["tgt_in"].shape
        assert b == b_in and batch["tgt_out"].shape == (b, t)
        assert b * max(s, t) <= 256
        assert (batch["tgt_in"][:, 0] == BOS_ID).all()
        # Both hold len(tgt) + 1 real tokens per row; tgt_out is tgt_in shifted left by one.
        assert torch.equal(batch["tgt_in"] != PAD_ID, batch["tgt_out"] != PAD_ID)
        shifted = batch["tgt_in"][:, 1:] != PAD_ID
        assert torch.equal(batch["tgt_in"][:, 1:][shifted], batch["tgt_out"][:, :-1][shifted])
        assert ((batch["src"] == EOS_ID).sum(dim=1) == 1).all()
        assert "tgt_text" not in batch
    # The buckets at both ends, as the auto budget's probe takes them: each pair's longer side.
    longer = torch.cat(
        [
            torch.maximum((b["src"] != PAD_ID).sum(1), (b["tgt_in"] != PAD_ID).sum(1))
            for b in batches
        ]
    )
    assert dm.train_pair_lengths() == (int(longer.min()), int(longer.max()))


def test_val_batches_decode_back_to_their_reference_text(tmp_path):
    dm = make_datamodule(tmp_path)
    dm.setup("validate")
    assert set(dm.datasets) == {"val"}
    tokenizer = dm.load_tokenizer()
    references, decoded = [], []
    for batch in dm.val_dataloader():
        for row, text in zip(batch["tgt_out"].tolist(), batch["tgt_text"], strict=True):
            decoded.append(tokenizer.decode_batch([row[: row.index(EOS_ID)]])[0])
            references.append(text)
    assert decoded == references
    assert sorted(references) == sorted(de for _, de in dm.corpus.read("val", "en", "de"))


def test_pairs_over_max_len_are_dropped_and_counted(tmp_path):
    dm = make_datamodule(tmp_path, max_len=6)  # toy words are single tokens; sentences have 3..10
    dm.setup("fit")
    tokenizer = dm.load_tokenizer()
    pairs = dm.corpus.read("train", "en", "de")
    src, tgt = (tokenizer.encode_batch(list(side)) for side in zip(*pairs, strict=True))
    expected = sum(max(len(s), len(t)) > 6 for s, t in zip(src, tgt, strict=True))
    assert 0 < expected < len(pairs)
    assert dm.dropped["train"] == expected
    assert len(dm.datasets["train"]) == len(pairs) - expected
    assert max(dm.datasets["train"].src_lengths) == 7


def test_val_loader_and_workers(tmp_path):
    dm = make_datamodule(tmp_path, num_workers=1)
    dm.setup("validate")
    assert set(dm.datasets) == {"val"}
    loader = dm.val_dataloader()
    assert loader.persistent_workers
    assert sum(len(b["tgt_text"]) for b in loader) == len(dm.corpus.read("val", "en", "de"))
    in_process = make_datamodule(tmp_path)
    in_process.setup("validate")
    assert not in_process.val_dataloader().persistent_workers


@pytest.mark.parametrize("stage", ["test", "predict"])
def test_no_test_or_predict_stage_points_at_nmt_evaluate(tmp_path, stage):
    dm = make_datamodule(tmp_path)
    with pytest.raises(ValueError, match="nmt-evaluate"):
        dm.setup(stage)
    assert not dm.datasets


class Recorder(L.LightningModule):
    """Records the batches Lightning feeds, one list per epoch."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list[list[int]]] = {}
        self.widths: set[int] = set()  # padded lengths, source and target
        self.positions: list[int] = []  # positions of each padded source and target tensor

    def training_step(self, batch, batch_idx):
        self.seen.setdefault(self.current_epoch, []).append(batch["src"][:, 0].tolist())
        self.widths |= {batch["src"].size(1), batch["tgt_in"].size(1)}
        self.positions += [batch["src"].numel(), batch["tgt_in"].numel()]
        return (self.weight * batch["src"].float().mean()).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def fit_recorder(tmp_path, max_epochs: int, precision: str = "32-true") -> Recorder:
    """A Recorder trained on the toy data module, without validation or checkpoints."""
    model = Recorder()
    trainer = L.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        precision=precision,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, datamodule=make_datamodule(tmp_path))  # pad_to_multiple_of="auto"
    return model


def test_lightning_reshuffles_batches_every_epoch(tmp_path):
    model = fit_recorder(tmp_path, max_epochs=2)
    assert len(model.seen[0]) == len(model.seen[1])
    assert model.seen[0] != model.seen[1]


def test_batches_hold_the_same_pairs_in_any_precision_and_round_in_16_bits_only(tmp_path):
    # The rounding is not counted in data.max_tokens (256 here): bf16 takes the same steps.
    bf16 = fit_recorder(tmp_path, max_epochs=1, precision="bf16-mixed")
    fp32 = fit_recorder(tmp_path, max_epochs=1, precision="32-true")
    assert bf16.seen == fp32.seen
    assert any(width % 8 for width in fp32.widths) and max(fp32.positions) <= 256
    # bf16 rounds to 8 where that fits, more finely where it would pass the budget by over 1/8.
    assert 8 in bf16.widths and any(width % 8 for width in bf16.widths)
    assert 256 < max(bf16.positions) <= 256 * 9 / 8


def test_a_resumed_run_continues_with_the_next_epochs_order(tmp_path):
    def fit(max_epochs: int, ckpt_path=None) -> tuple[Recorder, L.Trainer]:
        model = Recorder()
        trainer = L.Trainer(
            max_epochs=max_epochs,
            accelerator="cpu",
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            default_root_dir=tmp_path,
            use_distributed_sampler=False,
        )
        trainer.fit(model, datamodule=make_datamodule(tmp_path), ckpt_path=ckpt_path)
        return model, trainer

    uninterrupted, _ = fit(2)
    _, first = fit(1)
    first.save_checkpoint(tmp_path / "epoch0.ckpt")
    resumed, _ = fit(2, ckpt_path=tmp_path / "epoch0.ckpt")
    assert list(resumed.seen) == [1]
    assert resumed.seen[1] == uninterrupted.seen[1]


def test_a_tokenizer_trained_again_never_reads_the_stores_encoded_with_the_old_one(
    tmp_path, monkeypatch
):
    first = make_datamodule(tmp_path)
    first.prepare_data()
    (cached,) = (tmp_path / "cache").glob("bpe-*.json")
    cached.write_text('{"damaged')
    # Trained again, it differs from the first (as another `tokenizers` release may train it).
    train = BPETokenizer.train.__func__
    fewer = classmethod(lambda cls, sentences, vocab_size, *rest: train(cls, sentences, 300, *rest))
    monkeypatch.setattr(BPETokenizer, "train", fewer)
    second = make_datamodule(tmp_path)
    second.setup("fit")
    tokenizer = second.load_tokenizer()
    assert tokenizer.to_str() != first.load_tokenizer().to_str()
    for batch in second.val_dataloader():
        for row, text in zip(batch["tgt_out"].tolist(), batch["tgt_text"], strict=True):
            assert row[: row.index(EOS_ID)] == tokenizer.encode_batch([text])[0]
