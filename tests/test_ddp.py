"""Real multi-process DDP on CPU (gloo): `python train.py` as a user launches it.

`strategy=ddp` re-executes the entry script for each extra rank, which inside pytest would
re-run pytest: these tests therefore run `train.py` as subprocesses, each with a timeout so
that a hung rank fails the test instead of blocking CI.
"""

import csv
import os
import socket
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import open_dict, read_write

from hydra_compose import ROOT, compose_train
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.training.config_checks import check_config

TIMEOUT = 300
# A few hundred steps of the toy task: enough for a BLEU above zero to compare.
TOY = [
    "experiment=toy",
    "data.max_tokens=256",
    # Rounded lengths: smaller batches, enough steps for BLEU above 0, and rounding under DDP.
    "data.pad_to_multiple_of=8",
    "module.warmup_steps=30",
    "module.lr_factor=1.0",
    "trainer.max_epochs=4",
    "trainer.check_val_every_n_epoch=4",
    "trainer.precision=32-true",
]


def env() -> dict[str, str]:
    # One thread per rank: two ranks share the two cores of a CI runner.
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "tests")}


def weights_callback(dirpath: Path) -> list[str]:
    return [
        "+callbacks.weights._target_=ddp_helpers.SaveWeightsPerRank",
        f"+callbacks.weights.dirpath={dirpath}",
    ]


def assert_same_weights(dirpath: Path) -> None:
    rank0, rank1 = (torch.load(dirpath / f"rank{r}.pt") for r in (0, 1))
    assert rank0.keys() == rank1.keys()
    for name in rank0:
        torch.testing.assert_close(rank0[name], rank1[name], rtol=0, atol=0, msg=name)


def last_logged(metrics_csv: Path, name: str) -> float:
    with metrics_csv.open() as f:
        return [float(row[name]) for row in csv.DictReader(f) if row[name]][-1]


def validate_in_one_process(tmp_path: Path, ckpt: Path) -> dict[str, float]:
    """`trainer.validate` on one device, with the weights of a checkpoint."""
    cfg = compose_train(tmp_path / "single", TOY)
    with open_dict(cfg):
        cfg.paths.cache_dir = str(tmp_path / "cache")  # the tokenizer the DDP run trained
    datamodule = instantiate(cfg.data)
    tokenizer = datamodule.load_tokenizer()
    model = instantiate(cfg.model, vocab_size=tokenizer.vocab_size, pad_id=PAD_ID)
    module = instantiate(cfg.module, model=model, tokenizer=tokenizer, _convert_="all")
    module.load_state_dict(torch.load(ckpt, weights_only=True)["state_dict"])
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        use_distributed_sampler=False,
        precision="32-true",
    )
    (metrics,) = trainer.validate(module, datamodule=datamodule)
    return metrics


@pytest.mark.slow
def test_two_process_ddp_writes_one_run_and_scores_bleu_as_one_process(tmp_path):
    subprocess.run(
        [
            sys.executable, "train.py", *TOY, "trainer=ddp_cpu", "trainer.devices=2",
            "logger=csv", f"paths.log_dir={tmp_path}/outputs", f"paths.cache_dir={tmp_path}/cache",
            *weights_callback(tmp_path / "weights"),
        ],
        cwd=ROOT, env=env(), check=True, timeout=TIMEOUT, capture_output=True,
    )  # fmt: skip

    # One run directory (the rank 1 re-launch joins rank 0's), one logger version, one best.
    (run,) = (tmp_path / "outputs").iterdir()
    (run,) = (run / "runs").iterdir()
    (metrics_csv,) = run.glob("csv/*/metrics.csv")
    (best,) = (run / "checkpoints").glob("step*-bleu*.ckpt")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == sorted(
        ["last.ckpt", best.name]
    )
    assert_same_weights(tmp_path / "weights")

    # BLEU's sufficient statistics are summed over the ranks, so BLEU equals one process's.
    ddp_bleu = last_logged(metrics_csv, "val/bleu")
    assert ddp_bleu > 0
    single = validate_in_one_process(tmp_path, run / "checkpoints" / "last.ckpt")
    assert single["val/bleu"] == pytest.approx(ddp_bleu, abs=1e-4)
    assert single["val/loss"] == pytest.approx(last_logged(metrics_csv, "val/loss"), rel=1e-4)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_torchrun_nodes_train_together_and_agree_on_the_weights(tmp_path):
    port = free_port()
    nodes = [
        subprocess.Popen(
            [
                sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                "--nproc_per_node=1", f"--node_rank={node}", "--master_addr=127.0.0.1",
                f"--master_port={port}", "train.py", *TOY, "trainer.max_epochs=1",
                "trainer.check_val_every_n_epoch=1", "+trainer.limit_train_batches=10",
                "+trainer.limit_val_batches=1", "trainer=ddp_cpu", "trainer.devices=1",
                "trainer.num_nodes=2", "logger=none",
                # Each node writes where a real second machine would: its own disk.
                f"paths.log_dir={tmp_path}/node{node}", f"paths.cache_dir={tmp_path}/cache",
                *weights_callback(tmp_path / "weights"),
            ],
            cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        for node in (0, 1)
    ]  # fmt: skip
    try:
        codes = [node.wait(timeout=TIMEOUT) for node in nodes]
    finally:
        for node in nodes:
            node.kill()
    errors = [node.stderr.read().decode()[-3000:] for node in nodes]
    assert codes == [0, 0], errors
    assert_same_weights(tmp_path / "weights")
    # Only global rank zero writes checkpoints.
    assert list((tmp_path / "node0").glob("*/runs/*/checkpoints/last.ckpt"))
    assert not list((tmp_path / "node1").glob("*/runs/*/checkpoints/*"))


@pytest.mark.parametrize(
    ("trainer", "refused"),
    [
        (["trainer.devices=2", "trainer.strategy=ddp"], True),
        (["trainer.devices=4"], True),  # strategy auto on several GPUs is ddp
        (["trainer.devices=1", "trainer.num_nodes=2"], True),
        (["trainer.devices=2", "trainer.strategy=ddp_spawn"], False),
        (["trainer.devices=1"], False),
    ],
)
def test_multirun_with_relaunching_ddp_is_refused(tmp_path, trainer, refused):
    cfg = compose_train(tmp_path, ["trainer.accelerator=cpu", *trainer])
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.mode = "MULTIRUN"
    HydraConfig.instance().set_config(cfg)
    if refused:
        with pytest.raises(ValueError, match="ddp_spawn"):
            check_config(cfg)
    else:
        check_config(cfg)
