"""A two-direction toy run: BLEU and chrF per direction, their means, the languages saved."""

import subprocess
import sys

import lightning as L
import pytest
import sacrebleu
import torch
from hydra.utils import instantiate
from omegaconf import open_dict

from helpers.csv_metrics import logged
from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT, compose_train
from helpers.multilingual_files import write_parallel
from transformer_nmt.checkpoint import load_checkpoint
from transformer_nmt.data.framing import cut_at_eos
from transformer_nmt.data.languages import LANGUAGES_KEY, Languages, tag_ids
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID
from transformer_nmt.decoding import greedy_search
from transformer_nmt.evaluation.off_target import off_target_rate
from transformer_nmt.train import train


def two_directions(tmp_path, extra=()) -> list[str]:
    """A tiny model on en-de and de-en of 120 line-parallel toy lines, two epochs."""
    sizes = {"train": 120, "val": 20}
    folder = write_parallel(tmp_path / "data", sizes, languages=("en", "de"))
    return [
        "data=multi30k_multilingual",
        "model=tiny",
        "logger=csv",
        f"data.corpus.path={folder}",
        "data.corpus.splits={train: train, val: val, test: val}",
        "data.languages=[en,de]",
        "data.vocab_size=400",
        "data.min_frequency=1",
        "data.max_tokens=192",
        "data.max_len=32",
        "data.pad_to_multiple_of=1",
        "trainer.max_epochs=2",
        "trainer.max_steps=-1",
        "+trainer.num_sanity_val_steps=0",
        "+trainer.enable_progress_bar=false",
        "trainer.precision=32-true",
        "module.max_len_b=5",
        "module.warmup_steps=50",
        "module.lr_factor=0.2",
        "~callbacks.attention_maps",
        *extra,
    ]


@pytest.mark.slow
def test_validation_scores_each_direction_as_sacrebleu_scores_its_translations(tmp_path):
    # One direction monitored by name: its best checkpoint kept, as val/bleu's would be.
    monitor = "module.monitor=bleu/en-de"
    cfg = compose_train(tmp_path, two_directions(tmp_path, [monitor]))
    metrics = train(cfg)

    run = tmp_path / "run"
    assert len(list((run / "checkpoints").glob("step*-bleu-en-de*.ckpt"))) == 1
    assert "best/val/bleu/en-de" in metrics
    names = ("en-de", "de-en")
    for kind in ("bleu", "chrf"):
        per_direction = [metrics[f"val/{kind}/{name}"] for name in names]
        assert metrics[f"val/{kind}"] == pytest.approx(sum(per_direction) / 2)
        assert logged(run, f"val/{kind}/de-en")  # in the run's metrics, by step
    # The last validation scored the model last.ckpt holds: translate each direction again.
    checkpoint = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint[LANGUAGES_KEY] == {
        "languages": ["en", "de"],
        "directions": ["en-de", "de-en"],
        "tag_side": "target",
    }
    model, tokenizer = load_checkpoint(run / "checkpoints" / "last.ckpt")
    tags = tag_ids(tokenizer.tokens(), Languages.from_dict(checkpoint[LANGUAGES_KEY]))
    datamodule = instantiate(cfg.data)
    datamodule.setup("validate")
    found = {name: ([], []) for name in names}
    for batch in datamodule.val_dataloader():
        for index, name in enumerate(names):
            rows = (batch["direction"] == index).nonzero().squeeze(1)
            bos = tags[name.split("-")[1]]
            out = greedy_search(model.eval(), batch["src"][rows], bos, EOS_ID, max_len_b=5)
            found[name][0].extend(tokenizer.decode_batch([cut_at_eos(r) for r in out.tolist()]))
            found[name][1].extend(batch["tgt_text"][i] for i in rows.tolist())
    for name, (hypotheses, references) in found.items():
        assert len(references) == 20
        bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
        chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
        assert metrics[f"val/bleu/{name}"] == pytest.approx(bleu, abs=1e-4)
        assert metrics[f"val/chrf/{name}"] == pytest.approx(chrf, abs=1e-4)
        off_target = off_target_rate(hypotheses, name.split("-")[1], ["en", "de"])
        assert metrics[f"val/off_target/{name}"] == pytest.approx(off_target)
    assert metrics["val/off_target"] == pytest.approx(
        sum(metrics[f"val/off_target/{name}"] for name in names) / 2
    )


@pytest.mark.slow
def test_two_ddp_ranks_score_each_direction_as_one_process(tmp_path):
    overrides = [o for o in two_directions(tmp_path) if o != "logger=csv"]
    subprocess.run(
        [
            sys.executable, "train.py", *overrides, "trainer=ddp_cpu", "trainer.devices=2",
            "logger=csv", "~callbacks.translation_table", f"paths.log_dir={tmp_path}/outputs",
            f"paths.cache_dir={tmp_path}/cache",
        ],
        cwd=ROOT, env=ddp_env(), check=True, timeout=300, capture_output=True,
    )  # fmt: skip
    (run,) = (tmp_path / "outputs").glob("*/runs/*")
    names = ("val/bleu/en-de", "val/chrf/de-en", "val/chrf", "val/off_target/en-de")
    ddp = {name: logged(run, name) for name in names}

    cfg = compose_train(tmp_path / "single", overrides)
    with open_dict(cfg):
        cfg.paths.cache_dir = str(tmp_path / "cache")  # the tokenizer the DDP run trained
    datamodule = instantiate(cfg.data)
    tokenizer = datamodule.load_tokenizer()
    model = instantiate(cfg.model, vocab_size=tokenizer.vocab_size, pad_id=PAD_ID)
    module = instantiate(cfg.module, model=model, tokenizer=tokenizer, _partial_=True)(
        languages=datamodule.languages
    )
    module.load_state_dict(torch.load(run / "checkpoints" / "last.ckpt")["state_dict"])
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    (single,) = trainer.validate(module, datamodule=datamodule)
    for name, by_step in ddp.items():
        assert single[name] == pytest.approx(by_step[max(by_step)], abs=1e-4), name
