"""W&B through a run's life: one W&B run per run folder over every stop and start, checkpoints
as Artifacts, and the settings W&B cannot follow refused before training."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import open_dict

from helpers import wandb_records
from helpers.checkpoint_files import SENTENCES, write_checkpoint
from helpers.ddp import ddp_env
from helpers.fail_at_step import Interrupted, fail_at
from helpers.hydra_compose import ROOT, compose_train
from helpers.quick_toy_run import quick_toy_run
from helpers.signal_at_step import signal_at
from helpers.stalled_wandb_server import StalledWandbServer
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.runtime.wandb_run import RUN_FILE, folder_run, save_run, saved_run
from transformer_nmt.train import train
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.run_plan import check_config
from transformer_nmt.training.run.loggers import (
    PENDING_FILE,
    finish_wandb_runs,
    wandb_logger,
    wandb_problems,
)
from transformer_nmt.training.run.stop import exit_status

TOY = ["experiment=toy", "logger=wandb", "data.corpus.num_train=200", "data.corpus.num_val=8"]
# Training and one validation batch only: what W&B logs of them is the subject here.
FAST = ["+trainer.limit_val_batches=1", "~callbacks.attention_maps", "~callbacks.translation_table"]


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_SILENT", "true")


def offline_run(run_dir) -> str:
    """The id of the one offline W&B run in `run_dir`, from its folder and its records."""
    (folder,) = (run_dir / "wandb").glob("offline-run-*")
    (records,) = folder.glob("run-*.wandb")
    run_id = wandb_records.run_record(records).run_id
    assert folder.name.endswith(f"-{run_id}")
    return run_id


def fit(folder, overrides: list[str], cache) -> None:
    cfg = compose_train(folder, [*TOY, *FAST, f"paths.cache_dir={cache}", *overrides])
    with open_dict(cfg):
        del cfg.hydra  # as under @hydra.main, which hands the job config without it
    train(cfg)


@pytest.mark.slow
def test_a_resume_continues_the_w_and_b_run_and_uploads_the_best_checkpoint(tmp_path, offline):
    cache = tmp_path / "cache"
    first, resumed, fresh = tmp_path / "first", tmp_path / "resumed", tmp_path / "fresh"
    steps = ["trainer.max_epochs=-1", "trainer.val_check_interval=2"]
    fit(first, [*steps, "trainer.max_steps=4", "logger.wandb.log_model=all"], cache)
    last = first / "run" / "checkpoints" / "last.ckpt"
    fit(resumed, [*steps, "trainer.max_steps=5", f"ckpt_path={last}"], cache)
    fit(fresh, [*steps, "trainer.max_steps=1"], cache)

    run_id = offline_run(first / "run")
    assert saved_run(first / "run") == {"id": run_id, "project": "transformer-nmt", "step": 3}
    assert offline_run(resumed / "run") == run_id
    # A resume of the resume goes on too (update 5 logs nothing: no validation, no log step).
    assert saved_run(resumed / "run") == saved_run(first / "run")
    assert offline_run(fresh / "run") != run_id

    (records,) = (first / "run" / "wandb").glob("offline-run-*/run-*.wandb")
    artifacts = [r.artifact for r in wandb_records.read_records(records) if r.HasField("artifact")]
    artifacts = [a for a in artifacts if a.type == "model"]  # not the translation tables
    uploaded = [(json.loads(a.metadata)["original_filename"], set(a.aliases)) for a in artifacts]
    assert artifacts and all(a.name == f"model-{run_id}" for a in artifacts)
    (best,) = (first / "run" / "checkpoints").glob("step*-bleu*.ckpt")  # the kept best
    assert [name for name, aliases in uploaded if "best" in aliases][-1] == best.name
    assert ("last.ckpt", {"latest"}) in uploaded
    assert not any(name.startswith("step") and "bleu" not in name for name, _ in uploaded)


def test_log_model_with_w_and_b_disabled_is_refused_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    with pytest.raises(ConfigError, match="logger.wandb.log_model=all uploads checkpoints to W&B"):
        check_config(compose_train(tmp_path, [*TOY, "logger.wandb.log_model=all"]))
    check_config(compose_train(tmp_path, TOY))  # W&B off and nothing to upload: fine


@pytest.mark.parametrize("seconds", [0, -5])
def test_a_finish_timeout_that_bounds_nothing_is_refused(tmp_path, seconds):
    (problem,) = wandb_problems(compose_train(tmp_path, [f"logger.wandb.finish_timeout={seconds}"]))
    assert f"logger.wandb.finish_timeout={seconds} must be a number of seconds > 0" in problem
    assert wandb_problems(compose_train(tmp_path, ["logger.wandb.finish_timeout=null"])) == []


def test_a_resume_of_a_run_in_another_w_and_b_project_is_refused_naming_both(tmp_path):
    run_dir = tmp_path / "old"
    (run_dir / "checkpoints").mkdir(parents=True)
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    ckpt = write_checkpoint(run_dir / "checkpoints" / "last.ckpt", tokenizer)
    save_run(run_dir, "abc123", "other-project")
    cfg = compose_train(tmp_path, [*TOY, f"ckpt_path={ckpt}"])
    (problem,) = wandb_problems(cfg)
    assert "continues W&B run abc123 of project 'other-project'" in problem
    assert "logger.wandb.project='transformer-nmt'" in problem
    assert "set logger.wandb.project=other-project to continue it" in problem
    other = compose_train(
        tmp_path, [*TOY, f"ckpt_path={ckpt}", "logger.wandb.project=other-project"]
    )
    assert wandb_problems(other) == []


def test_a_run_folder_of_a_w_and_b_run_in_another_project_is_refused_before_any_write(tmp_path):
    """The folder's W&B run is its own: a start in it that names another project is refused, the
    record left as it was, rather than a second W&B run begun in the same folder."""
    save_run(tmp_path / "run", "abc123", "other-project", step=7)
    record = (tmp_path / "run" / RUN_FILE).read_bytes()
    with pytest.raises(ConfigError) as refused:
        train(compose_train(tmp_path, TOY))
    assert "this run folder logs to W&B run abc123 of project 'other-project'" in str(refused.value)
    assert f"({tmp_path / 'run' / RUN_FILE})" in str(refused.value)
    assert "set logger.wandb.project=other-project to go on with it" in str(refused.value)
    assert "hydra.run.dir=<another folder>" in str(refused.value)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [RUN_FILE]
    assert (tmp_path / "run" / RUN_FILE).read_bytes() == record


@pytest.mark.parametrize("key", ["continue_run=false", "ckpt_path=/a/last.ckpt", "id=abc123"])
def test_keys_that_once_chose_the_w_and_b_run_are_refused_by_name(tmp_path, key):
    (problem,) = wandb_problems(compose_train(tmp_path, [*TOY, f"+logger.wandb.{key}"]))
    name = key.split("=")[0]
    assert problem.startswith(f"logger.wandb.{name} is not read any more: a run folder logs")
    assert problem.endswith(f"remove logger.wandb.{name}")


def test_the_w_and_b_run_is_the_folders_else_the_resumed_checkpoints_else_a_new_one(tmp_path):
    a, b, c = (str(tmp_path / name) for name in "abc")
    first = folder_run(a, "p", None)
    assert first["step"] == -1 and first["id"] != folder_run(a, "p", None)["id"]  # none saved
    save_run(a, first["id"], "p", step=12)
    assert folder_run(a, "p", None) == {**first, "step": 12}
    assert folder_run(a, "p", f"{b}/checkpoints/last.ckpt") == {**first, "step": 12}  # its own
    assert folder_run(b, "p", f"{a}/checkpoints/last.ckpt") == {**first, "step": 12}
    assert folder_run(c, "p", f"{b}/checkpoints/last.ckpt")["id"] != first["id"]


def test_the_logger_saves_its_run_in_the_folder_unless_w_and_b_is_disabled(tmp_path, offline):
    first = wandb_logger(str(tmp_path / "a"), "p")
    assert saved_run(tmp_path / "a") == {"id": first.version, "project": "p", "step": -1}
    assert wandb_logger(str(tmp_path / "a"), "p").version == first.version
    wandb_logger(str(tmp_path / "d"), "p", mode="disabled")
    assert not (tmp_path / "d" / RUN_FILE).exists()  # no W&B run to continue


def test_steps_the_folders_w_and_b_run_logged_before_are_not_logged_again(tmp_path, offline):
    save_run(tmp_path, "abc123", "p", step=5)  # an earlier start logged up to step 5
    logger = wandb_logger(str(tmp_path), "p")
    for step in (4, 5, 6, 6, 7):  # trained again from step 3's last.ckpt, then on
        logger.log_metrics({"train/loss": float(step)}, step=step)
        assert saved_run(tmp_path)["step"] == max(step, 5)  # recorded as W&B gets it
    logger.experiment.finish()
    ids, steps = wandb_records.loss_curve(tmp_path)
    assert ids == {"abc123"} and steps == [6, 6, 7]  # a step's rows: training's, validation's


def service_process() -> int:
    """The pid of this process's W&B service, the `wandb-core` child W&B started."""
    (pid,) = [
        int(stat.parent.name)
        for stat in Path("/proc").glob("[0-9]*/stat")
        if stat.parent.name != "self"
        and (fields := stat.read_text().rsplit(")", 1)[1].split())[1] == str(os.getpid())
        and "wandb-core" in stat.read_text().split(")")[0]
    ]
    return pid


def test_rows_logged_after_w_and_b_s_service_is_gone_are_logged_by_the_next_start(
    tmp_path, offline, caplog
):
    """SLURM's SIGTERM to every process of a requeued job ends W&B's service too: the rows logged
    after that are kept, the start ends without an error, and the next start logs them first."""
    first = wandb_logger(str(tmp_path), "p")
    assert first.experiment.id == first.version  # the run started, as training starts it
    os.kill(service_process(), signal.SIGTERM)
    for step in (0, 1):
        first.log_metrics({"train/loss": float(step)}, step=step)
    finish_wandb_runs([first], None, exit_code=exit_status(signal.SIGTERM))
    assert "W&B's service process is gone" in caplog.text
    assert json.loads((tmp_path / PENDING_FILE).read_text()) == [
        [0, {"train/loss": 0.0}],
        [1, {"train/loss": 1.0}],
    ]

    (tmp_path / "wandb").rename(tmp_path / "first")  # its records end where the service did

    second = wandb_logger(str(tmp_path), "p")
    assert second.version == first.version
    second.log_metrics({"train/loss": 2.0}, step=2)
    finish_wandb_runs([second], None)
    assert not (tmp_path / PENDING_FILE).exists()
    (records,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    rows = wandb_records.history(records)
    assert [(r["trainer/global_step"], r["train/loss"]) for r in rows] == [(0, 0), (1, 1), (2, 2)]


MAX_STEPS = 12
QUICK = [*(o for o in quick_toy_run(max_steps=MAX_STEPS) if o != "logger=csv"), "logger=wandb"]


@pytest.mark.slow
def test_a_run_stopped_crashed_and_ended_is_one_w_and_b_run_with_one_curve(tmp_path, offline):
    """Stopped by SIGTERM at step 4, crashed at step 10 (its last.ckpt is older: steps are
    trained again), ended, then started again, with the same config each time: one W&B run whose
    loss curve holds each step once, and the folder's record names it."""
    overrides = [*QUICK, *signal_at(4, signal.SIGTERM, once=str(tmp_path / "signalled"))]
    cfg = compose_train(tmp_path, [*overrides, *fail_at(10), f"paths.cache_dir={tmp_path}/cache"])
    with open_dict(cfg):
        del cfg.hydra  # as under @hydra.main, which hands the job config without it
    with pytest.raises(SystemExit) as stopped:
        train(cfg.copy())
    assert stopped.value.code == exit_status(signal.SIGTERM)
    with pytest.raises(Interrupted):
        train(cfg.copy())
    train(cfg.copy())
    train(cfg.copy())  # an ended run started again: nothing to train, nothing logged twice

    ids, steps = wandb_records.loss_curve(tmp_path / "run")
    assert len(ids) == 1 and len(list((tmp_path / "run" / "wandb").glob("offline-run-*"))) == 4
    assert steps == list(range(MAX_STEPS))  # Lightning logs update n at step n - 1
    (run_id,) = ids
    record = {"id": run_id, "project": "transformer-nmt", "step": MAX_STEPS - 1}
    assert saved_run(tmp_path / "run") == record


@pytest.mark.slow
def test_two_ranks_stopped_and_started_again_log_one_curve_from_rank_0(tmp_path):
    """`trainer=ddp_cpu`, 2 gloo ranks, rank 1 alone signalled: the same command twice logs one
    W&B run, from rank 0 only (one W&B folder a start), whose curve holds each step once."""
    command = [
        sys.executable,
        "train.py",
        *QUICK,
        "trainer=ddp_cpu",
        "trainer.devices=2",
        *signal_at(5, signal.SIGTERM, once=str(tmp_path / "signalled"), rank=1),
        f"paths.cache_dir={tmp_path}/cache",
        f"hydra.run.dir={tmp_path}/run",
    ]
    env = {**ddp_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    starts = [
        subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        for _ in range(2)
    ]
    codes = [start.returncode for start in starts]
    assert codes == [exit_status(signal.SIGTERM), 0], starts[-1].stderr[-3000:]
    ids, steps = wandb_records.loss_curve(tmp_path / "run")
    assert len(ids) == 1 and len(list((tmp_path / "run" / "wandb").glob("offline-run-*"))) == 2
    assert steps == list(range(MAX_STEPS))


@pytest.mark.slow
def test_a_stop_exits_once_finish_timeout_is_spent_on_uploads_the_server_never_takes(tmp_path):
    """An online run, SIGTERMed, whose W&B server accepts uploads and never answers: the run saves
    last.ckpt, gives the uploads up after logger.wandb.finish_timeout, says how to send them and
    exits 143; unbounded, it would wait forever."""
    bound = 5
    run_dir = tmp_path / "run"
    overrides = [o for o in quick_toy_run(max_steps=10) if not o.startswith("logger=")]
    command = [
        *overrides,
        "logger=wandb",
        f"logger.wandb.finish_timeout={bound}",
        *signal_at(2, signal.SIGTERM),
        f"paths.cache_dir={tmp_path}/cache",
        f"hydra.run.dir={run_dir}",
    ]
    # tests/ on the path: the run loads `helpers.signal_at_step` from there.
    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")]))
    with StalledWandbServer() as server:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath}
        stopped = subprocess.run(
            [sys.executable, "train.py", *command],
            cwd=ROOT,
            env={**env, **server.env(tmp_path)},
            capture_output=True,
            text=True,
            timeout=bound + 120,
        )
        stalled = list(server.stalled)

    assert stopped.returncode == exit_status(signal.SIGTERM), stopped.stderr[-3000:]
    assert "Traceback" not in stopped.stderr
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert any(r.endswith("/file_stream") for r in stalled)  # finish had metrics it could not send
    (sync_dir,) = (run_dir / "wandb").glob("run-*")  # online: not offline-run-*
    assert (
        f"uploads unfinished after logger.wandb.finish_timeout={bound}s, left in {sync_dir}; "
        f"send them with `wandb sync {sync_dir}`"
    ) in (run_dir / "train.log").read_text()
