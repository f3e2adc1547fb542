"""A toy training run with the real wandb library offline: curves, attention images, table."""

import csv
import json

import matplotlib.image
import pytest
from omegaconf import open_dict

from helpers import wandb_records
from helpers.hydra_compose import compose_train
from helpers.quick_toy_run import quick_toy_run
from transformer_nmt.explorer.plots import figure_pixels
from transformer_nmt.train import train

pytestmark = pytest.mark.slow  # trains, with a real (offline) W&B run

KINDS = ("encoder_self", "decoder_self", "decoder_src")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Three steps, then validation; before them a sanity check that must draw nothing."""
    tmp_path = tmp_path_factory.mktemp("wandb_run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")  # never the network
        mp.setenv("WANDB_SILENT", "true")
        cfg = compose_train(
            tmp_path,
            [
                "experiment=toy",
                "data.corpus.num_train=300",
                "trainer.max_steps=3",
                "trainer.val_check_interval=3",  # validate at the last step, whatever the epoch
                "trainer.log_every_n_steps=1",
                "+trainer.limit_val_batches=1",
                "+trainer.num_sanity_val_steps=1",
                "callbacks.attention_maps.layers=[1]",
                "callbacks.attention_maps.num_sentences=1",
                "callbacks.translation_table.num_sentences=3",
            ],
        )
        with open_dict(cfg):
            del cfg.hydra  # as under @hydra.main, which hands the job config without it
        train(cfg)
    return tmp_path / "run"


@pytest.fixture(scope="module")
def wandb_run(run_dir):
    (folder,) = (run_dir / "wandb").glob("offline-run-*")
    (records,) = folder.glob("run-*.wandb")
    return folder, records


def test_pngs_per_validation_sentence_kind_and_layer_none_in_sanity_check(run_dir):
    steps = sorted(p.name for p in (run_dir / "attention").iterdir() if p.is_dir())
    assert steps == ["step0000003"]
    for step in steps:
        pngs = sorted((run_dir / "attention" / step).glob("*.png"))
        expected = {f"sentence0_{kind}_layer1.png" for kind in KINDS}
        assert {p.name for p in pngs} == expected
        for png in pngs:
            height, width, _ = matplotlib.image.imread(png).shape
            assert (width, height) == figure_pixels(4)  # the tiny model's 4 heads


def test_translations_tsv(run_dir):
    with (run_dir / "translations.tsv").open() as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["step"] for r in rows] == ["3"] * 3
    assert all(r["source"] and r["reference"] for r in rows)
    assert all(0 <= float(r["sentence_bleu"]) <= 100 for r in rows)


def test_wandb_history_holds_curves_images_and_table(wandb_run):
    folder, records = wandb_run
    rows = wandb_records.history(records)
    logged = set().union(*rows)
    for curve in ("train/loss", "train/ppl", "train/lr", "train/grad_norm", "train/src_pad_share",
                  "train/tgt_pad_share", "train/tokens_per_sec", "train/rss_gb", "val/loss",
                  "val/ppl", "val/bleu"):  # fmt: skip
        assert curve in logged, curve
    for kind in KINDS:
        images = [r for r in rows if f"attention/{kind}/layer1/filenames" in r]
        assert [r["trainer/global_step"] for r in images] == [3]  # not at the sanity check
        for row in images:
            assert row[f"attention/{kind}/layer1/count"] == 1
            for name in row[f"attention/{kind}/layer1/filenames"]:
                assert (folder / "files" / name).is_file()
    tables = [r for r in rows if "val/translations/path" in r]
    assert len(tables) == 1
    table = json.loads((folder / "files" / tables[-1]["val/translations/path"]).read_text())
    assert table["columns"] == ["step", "source", "reference", "hypothesis", "sentence_bleu"]
    assert len(table["data"]) == 3 and table["data"][0][0] == 3


def test_wandb_summary_name_tags_and_config(wandb_run):
    _, records = wandb_run
    summary = wandb_records.summary(records)
    assert set(summary["val/bleu"]) == {"max"}  # a sweep optimises the best value, not the last
    assert summary["best/val/bleu"] == summary["val/bleu"]["max"]
    assert summary["best/checkpoint"].endswith(".ckpt")
    assert wandb_records.metric_definitions(records)["val/bleu"].summary.max
    run = wandb_records.run_record(records)
    assert run.display_name.startswith("experiment=toy data.corpus.num_train=300")
    assert "paths." not in run.display_name  # where files go is not what the experiment is
    assert {"toy", "tiny", "experiment=toy", "trainer.max_steps=3"} <= set(run.tags)
    config = wandb_records.config(records)
    assert config["model"]["d_model"] == 64 and config["module"]["warmup_steps"] == 50


def page_validations(page) -> list[dict]:
    """The validations an explorer page holds, read back from its inline JSON."""
    text = page.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="data">') + len(
        '<script type="application/json" id="data">'
    )
    data = text[start : text.index("</script>", start)].replace("<\\/", "</")
    return json.loads(data)["validations"]


def test_an_explorer_page_per_validation_and_one_over_the_run(run_dir):
    step = run_dir / "attention" / "step0000003"
    (validation,) = page_validations(step / "explorer.html")
    assert validation == json.loads((step / "explorer.json").read_text())
    assert validation["step"] == 3
    (sentence,) = validation["sentences"]
    assert [r["name"] for r in sentence["readings"]] == ["translation", "reference"]
    assert page_validations(run_dir / "attention" / "explorer.html") == [validation]


def test_wandb_holds_the_explorer_pages(wandb_run):
    folder, records = wandb_run
    rows = wandb_records.history(records)
    for key in ("attention/explorer", "attention/explorer_run"):
        pages = [r for r in rows if f"{key}/path" in r]
        assert [r["trainer/global_step"] for r in pages] == [3], key
        assert "explorer" in (folder / "files" / pages[0][f"{key}/path"]).read_text()


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory):
    """A run that validates at step 2 and ends, then resumes in its folder up to step 4.

    Returns the run folder and step 2's explorer data file as the first run left it: its bytes,
    and its inode, which a rewrite (temporary file renamed into place) would change.
    """
    tmp_path = tmp_path_factory.mktemp("resumed")
    overrides = [o for o in quick_toy_run(2) if o != "~callbacks.attention_maps"] + [
        "logger=none",
        "trainer.val_check_interval=2",
        "callbacks.attention_maps.layers=[1]",
        "callbacks.attention_maps.num_sentences=1",
    ]
    left = None
    for max_steps in (2, 4):
        cfg = compose_train(tmp_path, [*overrides, f"trainer.max_steps={max_steps}"])
        with open_dict(cfg):
            del cfg.hydra
        train(cfg)
        path = tmp_path / "run/attention/step0000002/explorer.json"
        left = left or (path.read_bytes(), path.stat().st_ino)
    return tmp_path / "run", left


def test_the_run_page_gathers_the_validations_before_a_resume_too(resumed_run):
    run_dir, left = resumed_run
    validations = page_validations(run_dir / "attention" / "explorer.html")
    assert [v["step"] for v in validations] == [2, 4]
    assert [s["layers"] for v in validations for s in v["sentences"]] == [[1], [1]]  # layers=[1]
    data, inode = left
    assert validations[0] == json.loads(data)  # the first run's, not written again
    assert (run_dir / "attention/step0000002/explorer.json").stat().st_ino == inode
