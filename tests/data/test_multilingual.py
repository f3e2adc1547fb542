import lightning as L
import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import open_dict

from helpers.hydra_compose import compose_train
from helpers.multilingual_files import write_parallel
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.corpus import DataError
from transformer_nmt.data.languages import Languages, tag_ids
from transformer_nmt.data.multilingual import MultilingualDataModule, epoch_indices
from transformer_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


def make_multilingual(tmp_path, languages=("en", "de", "fr"), **overrides):
    """A data module over 240 line-parallel lines in each of three languages (unless the test
    wrote its own), French's first 180 lines empty: its directions have 60 pairs."""
    folder = tmp_path / "data"
    if not folder.exists():
        write_parallel(folder, blank={"fr": 180})
    settings = dict(
        vocab_size=400, min_frequency=1, max_tokens=256, max_len=32, cache_dir=str(tmp_path / "c")
    )
    return MultilingualDataModule(TextCorpus(str(folder)), list(languages), **settings | overrides)


def ready(dm: MultilingualDataModule) -> MultilingualDataModule:
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_every_ordered_pair_is_a_direction_unless_listed_or_excluded():
    every = Languages.from_config(["de", "en", "fr", "cs"])
    assert len(every.directions) == 12 and ("fr", "cs") in every.directions
    zero_shot = Languages.from_config(["de", "en", "fr", "cs"], exclude=["fr-cs", "cs-fr"])
    assert len(zero_shot.names) == 10 and "fr-cs" not in zero_shot.names
    listed = Languages.from_config(["de", "en"], directions=["de-en"])
    assert listed.directions == (("de", "en"),)
    assert Languages.from_dict(zero_shot.to_dict()) == zero_shot


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"directions": ["de-en", "de-en"]}, "data.directions lists \\['de-en'\\] twice"),
        ({"directions": ["de-xx"]}, "data.directions: de-xx names \\['xx'\\]"),
        ({"directions": ["de"]}, "data.directions: 'de' is no direction"),
        ({"exclude": ["en-de"], "directions": ["de-en"]}, "data.exclude names \\['en-de'\\]"),
        ({"tag_side": "middle"}, "data.tag_side='middle'"),
        ({"languages": ["de", "de"]}, "data.languages names \\['de'\\] twice"),
    ],
)
def test_bad_direction_options_are_refused_naming_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        Languages.from_config(**{"languages": ["de", "en"]} | options)


def test_a_language_without_its_file_is_refused_naming_the_folder(tmp_path):
    write_parallel(tmp_path / "data", languages=("en", "de"))
    with pytest.raises(DataError, match=r"no train\.fr or train\.fr\.gz .* it holds: train\.de"):
        make_multilingual(tmp_path).prepare_data()


def test_text_that_holds_a_language_tag_is_refused_naming_the_file(tmp_path):
    folder = write_parallel(tmp_path / "data")
    lines = (folder / "train.de").read_text().splitlines()
    lines[6] = "eins <2fr> zwei"
    (folder / "train.de").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"train\.de, pair 7: the text holds the language tag"):
        make_multilingual(tmp_path).prepare_data()


def test_each_language_has_one_tag_token_that_decoding_skips(tmp_path):
    dm = make_multilingual(tmp_path)
    tokenizer = dm.load_tokenizer()
    ids = tag_ids(tokenizer.tokens(), dm.languages)
    assert ids == {"en": 4, "de": 5, "fr": 6}  # right after the four specials
    assert tokenizer.decode_batch([[ids["fr"], *tokenizer.encode_batch(["un deux"])[0]]]) == [
        "un deux"
    ]
    # Text spelling a tag is text: encoded by bytes, never as the tag.
    assert ids["fr"] not in tokenizer.encode_batch(["<2fr>"])[0]


def batches_by_direction(dm, loader):
    """Each batch's rows with the tag ids read from the batch, and its directions."""
    return [(batch, batch["direction"].tolist()) for batch in loader]


def test_target_tags_take_bos_place_and_are_never_predicted(tmp_path):
    dm = ready(make_multilingual(tmp_path))
    ids = tag_ids(dm.tokenizer.tokens(), dm.languages)
    tags = torch.tensor(list(ids.values()))
    mixed = 0
    for batch, directions in batches_by_direction(dm, dm.train_dataloader()):
        wanted = [ids[dm.languages.directions[d][1]] for d in directions]
        assert batch["tgt_in"][:, 0].tolist() == wanted
        assert not torch.isin(batch["tgt_out"], tags).any()  # the loss never sees a tag
        assert not torch.isin(batch["src"], tags).any() and (batch["src"][:, 0] != BOS_ID).all()
        mixed += len(set(directions)) > 1
    assert mixed  # length buckets hold several directions


def test_a_source_side_tag_opens_the_source_and_the_decoder_starts_with_bos(tmp_path):
    dm = ready(make_multilingual(tmp_path, tag_side="source"))
    ids = tag_ids(dm.tokenizer.tokens(), dm.languages)
    for batch, directions in batches_by_direction(dm, dm.val_dataloader()):
        wanted = [ids[dm.languages.directions[d][1]] for d in directions]
        assert batch["src"][:, 0].tolist() == wanted
        assert (batch["tgt_in"][:, 0] == BOS_ID).all()
        assert ((batch["src"] == EOS_ID).sum(1) == 1).all()
    # The tag is counted in the source's length, so batches keep to their budget.
    train = dm.datasets["train"]
    assert (train.src_lengths == train.parts[0].src_lengths.max() + 1).any()


def test_an_epoch_holds_every_pair_of_every_direction_once_within_the_budget(tmp_path):
    dm = ready(make_multilingual(tmp_path, directions=["en-de", "de-fr", "fr-en"]))
    seen = []
    for batch in dm.train_dataloader():
        assert batch["src"].numel() <= 256 and batch["tgt_in"].numel() <= 256
        rows = (batch["tgt_out"] != PAD_ID).sum(1)
        seen += list(zip(batch["direction"].tolist(), rows.tolist(), strict=True))
    assert np.bincount([d for d, _ in seen]).tolist() == [240, 60, 60]


class Recorder(L.LightningModule):
    """Records the batches Lightning feeds, one list per epoch."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list] = {}

    def training_step(self, batch, batch_idx):
        rows = list(zip(batch["direction"].tolist(), batch["src"][:, 0].tolist(), strict=True))
        self.seen.setdefault(self.current_epoch, []).append(rows)
        return (self.weight * batch["src"].float().mean()).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_a_resumed_run_continues_with_the_next_epochs_batches(tmp_path, temperature):
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
            reload_dataloaders_every_n_epochs=int(temperature != 1),
        )
        dm = make_multilingual(tmp_path, temperature=temperature)
        trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path, weights_only=True)
        return model, trainer

    uninterrupted, _ = fit(2)
    _, first = fit(1)
    first.save_checkpoint(tmp_path / "epoch0.ckpt")
    resumed, _ = fit(2, ckpt_path=tmp_path / "epoch0.ckpt")
    assert list(resumed.seen) == [1]
    assert resumed.seen[1] == uninterrupted.seen[1]
    assert uninterrupted.seen[0] != uninterrupted.seen[1]


def epoch_shares(dm: MultilingualDataModule) -> np.ndarray:
    """Each direction's share of the pairs one epoch's batches hold."""
    directions = np.concatenate([b["direction"].numpy() for b in dm.train_dataloader()])
    return np.bincount(directions, minlength=len(dm.languages.directions)) / len(directions)


@pytest.mark.parametrize("temperature", [1.0, 2.0, 5.0, 100.0])
def test_an_epochs_directions_follow_the_temperature_probabilities(tmp_path, temperature):
    dm = ready(make_multilingual(tmp_path, temperature=temperature))
    sizes = np.array([240, 60, 240, 60, 60, 60])  # en-de en-fr de-en de-fr fr-en fr-de
    expected = sizes ** (1 / temperature) / (sizes ** (1 / temperature)).sum()
    assert list(dm.probabilities) == ["en-de", "en-fr", "de-en", "de-fr", "fr-en", "fr-de"]
    assert np.allclose(list(dm.probabilities.values()), expected)
    shares = epoch_shares(dm)
    assert np.abs(shares - expected).max() < 0.005  # an epoch of 720 pairs, counts rounded
    assert dm.state_dict()["direction_sampling"]["probabilities"] == dm.probabilities


def test_a_higher_temperature_is_flatter_and_draws_each_epoch_anew(tmp_path):
    cold, hot = (ready(make_multilingual(tmp_path, temperature=t)) for t in (1.0, 5.0))
    assert np.ptp(epoch_shares(hot)) < np.ptp(epoch_shares(cold))
    sizes = hot.datasets["train"].sizes
    first, second = (epoch_indices(sizes, 5.0, seed=0, epoch=e) for e in (0, 1))
    directions = hot.datasets["train"].directions()
    assert np.array_equal(np.bincount(directions[first]), np.bincount(directions[second]))
    assert set(first) != set(second)  # the downsampled directions give other pairs
    assert np.array_equal(first, epoch_indices(sizes, 5.0, seed=0, epoch=0))


def test_a_capped_direction_trains_on_its_first_pairs_and_is_fingerprinted_apart(tmp_path):
    full = ready(make_multilingual(tmp_path))
    capped = ready(make_multilingual(tmp_path, max_train_pairs={"en-de": 50, "de-en": 50}))
    sizes = dict(zip(capped.languages.names, capped.datasets["train"].sizes, strict=True))
    assert sizes == {"en-de": 50, "en-fr": 60, "de-en": 50, "de-fr": 60, "fr-en": 60, "fr-de": 60}
    kept, whole = capped.datasets["train"].parts[0], full.datasets["train"].parts[0]
    first = [capped.tokenizer.decode_batch([kept[i]["tgt"]])[0] for i in range(50)]
    assert first == [full.tokenizer.decode_batch([whole[i]["tgt"]])[0] for i in range(50)]
    # The joint BPE reads each language where it is not cut.
    assert all(d not in {("en", "de"), ("de", "en")} for d, _ in capped._language_sides().values())
    assert len(capped.datasets["val"]) == len(full.datasets["val"])  # validation is whole
    assert capped.state_dict()["train_fingerprint"] != full.state_dict()["train_fingerprint"]
    assert capped.probabilities["en-de"] == pytest.approx(50 / 340)  # T=1: proportional


@pytest.mark.parametrize(
    ("caps", "message"),
    [
        ({"de-cs": 10}, r"names \['de-cs'\], which are not trained; the directions are"),
        ({"de-en": 0}, r"data.max_train_pairs=\{'de-en': 0\}: each must be a positive"),
    ],
)
def test_bad_caps_are_refused_naming_the_option(tmp_path, caps, message):
    with pytest.raises(ValueError, match=message):
        make_multilingual(tmp_path, max_train_pairs=caps)


@pytest.mark.slow
def test_a_trainer_that_never_reloads_its_loader_is_refused_at_a_temperature(tmp_path):
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_progress_bar=False)
    with pytest.raises(ValueError, match="data.temperature=3.0 .* reload_dataloaders_every_n"):
        trainer.fit(Recorder(), datamodule=make_multilingual(tmp_path, temperature=3.0))


def test_the_multi30k_config_reads_twelve_line_parallel_directions(tmp_path, multi30k_dir):
    cut = "data.max_train_pairs={cs-en:3000,en-cs:3000}"
    cfg = compose_train(tmp_path, ["data=multi30k_multilingual", "data.exclude=[fr-cs,cs-fr]", cut])
    with open_dict(cfg):
        cfg.data.corpus.path = str(multi30k_dir)
    dm = instantiate(cfg.data)
    assert len(dm.languages.directions) == 10 and "fr-cs" not in dm.languages.names
    assert type(dm.hparams.max_train_pairs) is dict  # plain, for weights_only checkpoints
    assert dm.max_train_pairs == {"cs-en": 3000, "en-cs": 3000}
    counts = {
        name: sum(1 for _ in dm._pairs("val", d))
        for name, d in zip(dm.languages.names, dm.languages.directions, strict=True)
    }
    assert set(counts.values()) == {1014}, counts
