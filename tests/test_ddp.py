"""Real multi-process DDP on CPU (gloo): `python train.py` as a user launches it.

`strategy=ddp` re-executes the entry script for each extra rank, which inside pytest would
re-run pytest: these tests therefore run `train.py` as subprocesses, each with a timeout so
that a hung rank fails the test instead of blocking CI.
"""

import csv
import re
import signal
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import open_dict, read_write

from helpers.ddp import (
    BatchesPerRank,
    SaveGradients,
    assert_same_weights,
    batch,
    ddp_env,
    sentences,
    tiny_module,
    weights_callback,
)
from helpers.hydra_compose import ROOT, compose_train
from helpers.loopback import free_ports
from helpers.signal_at_step import signal_at
from transformer_nmt.data.tokenizer import PAD_ID
from transformer_nmt.model import Transformer
from transformer_nmt.training.plan.run_plan import check_config

TIMEOUT = 300
# A few hundred steps of the toy task: enough for a BLEU above zero to compare.
TOY = [
    "experiment=toy",
    "~callbacks.attention_maps",  # drawing them would take most of each validation
    "data.max_tokens=256",
    # Rounded lengths, as 16-bit training pads them, so the rounding runs under DDP too.
    "data.pad_to_multiple_of=8",
    "module.warmup_steps=30",
    "module.lr_factor=1.0",
    "trainer.max_epochs=4",
    "trainer.check_val_every_n_epoch=4",
    "trainer.precision=32-true",
]


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
        cwd=ROOT, env=ddp_env(), check=True, timeout=TIMEOUT, capture_output=True,
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
    # A log per rank: rank 1's lines are in its own file, not in rank 0's train.log.
    logs = [(run / name).read_text() for name in ("train.log", "train.rank1.log")]
    assert [log.count(" - Model: ") for log in logs] == [1, 1]

    # BLEU's sufficient statistics are summed over the ranks, so BLEU equals one process's.
    ddp_bleu = last_logged(metrics_csv, "val/bleu")
    assert ddp_bleu > 0
    single = validate_in_one_process(tmp_path, run / "checkpoints" / "last.ckpt")
    assert single["val/bleu"] == pytest.approx(ddp_bleu, abs=1e-4)
    assert single["val/loss"] == pytest.approx(last_logged(metrics_csv, "val/loss"), rel=1e-4)


@pytest.mark.slow
def test_a_lost_rank_ends_the_run_naming_it_and_the_same_command_resumes(tmp_path):
    """Rank 1 is killed as step 5 starts (last.ckpt: step 3); rank 0 must not hang."""
    run = tmp_path / "run"
    command = [
        sys.executable, "train.py", "experiment=toy", "trainer=ddp_cpu", "logger=none",
        "data.corpus.num_train=300", "data.max_tokens=192", "trainer.max_epochs=-1",
        "trainer.max_steps=8", "+trainer.limit_val_batches=0", "+trainer.num_sanity_val_steps=0",
        "trainer.precision=32-true", "callbacks.checkpoints.every_n_steps=3",
        "ddp_timeout_minutes=10",
        f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache", f"hydra.run.dir={run}",
        *signal_at(5, signal.SIGKILL, once=f"{tmp_path}/killed_once", rank=1),
    ]  # fmt: skip
    lost = subprocess.run(
        command, cwd=ROOT, env=ddp_env(), timeout=TIMEOUT, capture_output=True, text=True
    )
    assert lost.returncode != 0
    # Named by LostRank if a collective fails first, else by Lightning's process observer.
    said = lost.stderr + (run / "train.log").read_text()
    assert re.search(r"DDP rank 1 \(pid \d+\) was lost|\[rank: 1\] Child process", said), said[
        -3000:
    ]
    checkpoint = run / "checkpoints" / "last.ckpt"
    assert torch.load(checkpoint, weights_only=True)["global_step"] == 3  # whole, as saved

    again = subprocess.run(
        command, cwd=ROOT, env=ddp_env(), timeout=TIMEOUT, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Resuming from {checkpoint}" in (run / "train.log").read_text()
    assert torch.load(checkpoint, weights_only=True)["global_step"] == 8


@pytest.mark.slow
def test_two_torchrun_nodes_train_together_and_agree_on_the_weights(tmp_path):
    port = free_ports(1)[0]
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
            cwd=ROOT, env=ddp_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
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
    # A log per rank, named by torchrun's RANK.
    assert [p.name for p in (tmp_path / "node1").glob("*/runs/*/train*.log")] == ["train.rank1.log"]


@pytest.mark.slow
def test_torchrun_ranks_train_the_tokenizer_and_encode_once_and_share_both(tmp_path):
    run = subprocess.run(
        [
            sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
            f"--master_port={free_ports(1)[0]}", "train.py", "experiment=toy", "trainer=ddp_cpu",
            "trainer.devices=2", "trainer.max_steps=2", "+trainer.limit_val_batches=0",
            "+trainer.num_sanity_val_steps=0", "trainer.precision=32-true", "logger=none",
            "optimized_metric=null",
            f"paths.log_dir={tmp_path}/outputs", f"paths.cache_dir={tmp_path}/cache",
        ],
        cwd=ROOT, env=ddp_env(), timeout=TIMEOUT, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout + run.stderr
    assert out.count("training the BPE tokenizer on ToyCorpus") == 1
    # Local rank 0 encodes each split once in prepare_data; both ranks then map that store.
    (bpe, train, val) = sorted((tmp_path / "cache").iterdir())
    assert bpe.name.startswith("bpe-")
    assert out.count(f"Token store: wrote {train} ") == out.count(f"Token store: wrote {val} ") == 1
    assert out.count(f"Token store: reusing {train} ") == 2


SLURM, LOCAL = ["hydra/launcher=submitit_slurm"], ["hydra/launcher=submitit_local"]


@pytest.mark.parametrize(
    ("trainer", "refused"),
    [
        (["trainer.devices=2", "trainer.strategy=ddp"], True),
        (["trainer.devices=4"], True),  # strategy auto on several GPUs is ddp
        (["trainer.devices=1", "trainer.num_nodes=2"], True),
        (["trainer.devices=1"], False),
        # A SLURM job per trial whose tasks are its ranks: SLURM starts them, nothing re-runs.
        (["trainer.devices=2", *SLURM, "hydra.launcher.tasks_per_node=2"], False),
        (
            ["trainer.devices=4", "trainer.num_nodes=2", *SLURM, "hydra.launcher.nodes=2"]
            + ["hydra.launcher.tasks_per_node=4"],
            False,
        ),
        # Tasks that are not the ranks, or the local executor's tasks: the ranks re-run it.
        (["trainer.devices=2", *SLURM], True),
        (
            ["trainer.devices=4", "trainer.num_nodes=2", *SLURM, "hydra.launcher.tasks_per_node=4"],
            True,
        ),
        (["trainer.devices=2", *LOCAL, "hydra.launcher.tasks_per_node=2"], True),
    ],
)
def test_multirun_with_relaunching_ddp_is_refused(tmp_path, trainer, refused):
    cfg = compose_train(tmp_path, ["trainer.accelerator=cpu", *trainer])
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.mode = "MULTIRUN"
    HydraConfig.instance().set_config(cfg)
    if refused:
        with pytest.raises(ValueError, match="would run the sweep once per rank"):
            check_config(cfg)
    else:
        check_config(cfg)


def gradients_of_one_step(
    tmp_path: Path, batches: list[list[dict]], strategy: str = "auto"
) -> list[dict[str, torch.Tensor]]:
    """Every rank's gradients of one optimizer step of `tiny_module()`, rank r on batches[r].

    A rank given several batches accumulates them all into its one step.
    """
    trainer = L.Trainer(
        accelerator="cpu", devices=len(batches), strategy=strategy, max_steps=1,
        accumulate_grad_batches=len(batches[0]), precision="32-true", logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        use_distributed_sampler=False, callbacks=[SaveGradients(str(tmp_path))],
    )  # fmt: skip
    trainer.fit(tiny_module(), train_dataloaders=BatchesPerRank(batches))
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(len(batches))]


def assert_mean_over_all_tokens(grads: dict, single: dict, naive: dict) -> None:
    """`grads` equals the one-batch gradient `single`; the mean of per-batch means is far off."""
    for name, grad in single.items():
        torch.testing.assert_close(grads[name], grad, rtol=0, atol=1e-6, msg=name)
    assert max((naive[n] - single[n]).abs().max() for n in single) > 1e-3


@pytest.mark.slow
def test_two_ranks_on_a_and_b_give_the_gradient_of_one_process_on_their_union(tmp_path):
    a, b = sentences([3, 4], [8, 11, 9])
    batch_a, batch_b, both = batch(a), batch(b), batch(a, b)
    assert batch_a["tgt_index"].numel() == 9 and batch_b["tgt_index"].numel() == 31

    rank0, rank1 = gradients_of_one_step(tmp_path / "ddp", [[batch_a], [batch_b]], "ddp_spawn")
    (single,) = gradients_of_one_step(tmp_path / "union", [[both]])
    (only_a,) = gradients_of_one_step(tmp_path / "a", [[batch_a]])
    (only_b,) = gradients_of_one_step(tmp_path / "b", [[batch_b]])
    naive = {n: (only_a[n] + only_b[n]) / 2 for n in single}  # each rank's own mean, averaged
    assert_mean_over_all_tokens(rank0, single, naive)
    for name in single:
        torch.testing.assert_close(rank1[name], rank0[name], rtol=0, atol=0, msg=name)


def test_accumulated_batches_give_the_gradient_of_their_union(tmp_path):
    groups = sentences([3, 4], [8, 11, 9], [2])  # 9, 31 and 3 target tokens
    batches = [batch(group) for group in groups]
    (accumulated,) = gradients_of_one_step(tmp_path / "accumulated", [batches])
    (single,) = gradients_of_one_step(tmp_path / "union", [[batch(*groups)]])
    alone = [gradients_of_one_step(tmp_path / f"b{i}", [[b]])[0] for i, b in enumerate(batches)]
    naive = {n: sum(g[n] for g in alone) / len(alone) for n in single}  # Lightning's default
    assert_mean_over_all_tokens(accumulated, single, naive)


@pytest.mark.slow
def test_two_ranks_accumulating_give_the_gradient_of_one_process_on_all_batches(tmp_path):
    a1, a2, b1, b2 = sentences([3, 4], [2], [8, 11, 9], [7, 4])
    ranks = [[batch(a1), batch(a2)], [batch(b1), batch(b2)]]
    rank0, rank1 = gradients_of_one_step(tmp_path / "ddp", ranks, "ddp_spawn")
    (single,) = gradients_of_one_step(tmp_path / "union", [[batch(a1, a2, b1, b2)]])
    for name, grad in single.items():
        torch.testing.assert_close(rank0[name], grad, rtol=0, atol=1e-6, msg=name)
        torch.testing.assert_close(rank1[name], rank0[name], rtol=0, atol=0, msg=name)


def test_ddp_has_no_buffer_to_broadcast_before_each_forward(tmp_path):
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        model = Transformer(vocab_size=48, pad_id=PAD_ID, N=1, d_model=16, d_ff=32, h=2)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        assert ddp.broadcast_buffers  # Lightning's default, also under strategy=auto
        assert not ddp.will_sync_module_buffers()
    finally:
        torch.distributed.destroy_process_group()
