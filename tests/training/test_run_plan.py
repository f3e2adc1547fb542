"""The run plan: decided before the Trainer on global rank 0, taken by every rank, checkpointed."""

import dataclasses
import json
import os
import subprocess
import sys
import threading

import pytest
import torch
from omegaconf import OmegaConf
from torch.distributed import TCPStore

from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT, compose_train
from helpers.quick_toy_run import quick_toy_run
from helpers.start_per_rank import start_per_rank
from transformer_nmt.train import train
from transformer_nmt.training.plan.config_checks import ConfigError
from transformer_nmt.training.plan.plan_sharing import (
    PLAN_ENV,
    agreed_plan,
    launch_key,
    plan_file,
    refusals_handed_over,
    start_handed_over,
)
from transformer_nmt.training.plan.refusals import RankRefused
from transformer_nmt.training.plan.run_plan import RunPlan, plan_run

TOY = ["experiment=toy", "logger=none", "trainer.precision=32-true"]
# The variables srun sets on task 1 of 2 (task 0's: SLURM_PROCID=0).
SRUN = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}


def torchrun(port: int) -> dict[str, str]:
    """The variables torchrun sets on rank 1 of 2 (rank 0's: RANK=0), its agent store at port."""
    return {
        "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "job",
        "TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }  # fmt: skip


def checkpoint_with_plan(tmp_path, **changes) -> str:
    """A checkpoint in tmp_path holding the toy run's plan, with `changes`; its path."""
    plan = dataclasses.replace(plan_run(compose_train(tmp_path, TOY)), **changes)
    path = tmp_path / "saved.ckpt"
    torch.save({"global_step": 7, "run_plan": plan.to_dict()}, path)
    return str(path)


def test_the_plan_is_plain_loads_back_weights_only_and_says_itself_in_one_line(tmp_path):
    plan = plan_run(compose_train(tmp_path, [*TOY, "trainer.max_steps=300"]))
    torch.save({"run_plan": plan.to_dict()}, tmp_path / "plan.pt")
    assert (
        RunPlan.from_dict(torch.load(tmp_path / "plan.pt", weights_only=True)["run_plan"]) == plan
    )
    assert plan.describe() == (
        "Run plan: start from scratch; 32-true; 1 process(es) x 1 batch(es) of 1024 tokens a "
        "side per update (1024 at most); ends after 300 updates; "
        "cool-down: none; periodic checkpoints kept: 5"
    )
    timed = plan_run(
        compose_train(tmp_path, [*TOY, "trainer.max_steps=300", "trainer.max_time=00:00:10:00"])
    )
    assert "ends after 300 updates or 00:00:10:00 of wall time, whichever comes first;" in (
        timed.describe()
    )


def test_planning_writes_nothing_into_the_config(tmp_path):
    cfg = compose_train(tmp_path, [*TOY, "data.tokens_per_update=1500"])
    before = OmegaConf.to_yaml(cfg)
    plan = plan_run(cfg)
    assert (plan.accumulate_grad_batches, plan.max_tokens, plan.tokens_per_update) == (2, 750, 1500)
    assert OmegaConf.to_yaml(cfg) == before


def test_a_resumed_auto_budget_is_the_one_measured_when_the_run_started(tmp_path):
    saved = checkpoint_with_plan(tmp_path, max_tokens=600, accumulate_grad_batches=2)
    plan = plan_run(compose_train(tmp_path, [*TOY, "data.max_tokens=auto", f"ckpt_path={saved}"]))
    assert (plan.max_tokens, plan.accumulate_grad_batches, plan.resume_from) == (600, 2, saved)
    fresh = plan_run(compose_train(tmp_path, [*TOY, "data.max_tokens=auto"]))
    assert fresh.max_tokens is None and fresh.tokens_per_update is None  # measured as fit sets up


def test_a_resume_on_another_world_size_is_refused_naming_both(tmp_path):
    saved = checkpoint_with_plan(tmp_path, world_size=2)
    with pytest.raises(ConfigError) as info:
        plan_run(compose_train(tmp_path, [*TOY, f"ckpt_path={saved}"]))
    assert f"ckpt_path={saved} was trained on 2 process(es), this run has 1" in str(info.value)
    assert "resume on 2 process(es)" in str(info.value)


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
def test_rank_1_of_srun_or_torchrun_takes_rank_0s_plan(tmp_path, monkeypatch, launcher):
    """srun: through a file in the run folder; torchrun: through its agent's store, no file."""
    monkeypatch.setenv(PLAN_ENV, "")  # rank 0 hands its plan on in this process's environment
    plan = plan_run(compose_train(tmp_path, TOY))
    (tmp_path / "last.ckpt").touch()
    resumed = dataclasses.replace(plan, resume_from=str(tmp_path / "last.ckpt"))
    if launcher == "srun":
        rank_1, rank_0 = SRUN, {**SRUN, "SLURM_PROCID": "0"}
    else:
        agent = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        rank_1 = torchrun(agent.port)
        rank_0 = {**rank_1, "RANK": "0", "LOCAL_RANK": "0"}
    received = {}

    def take() -> None:
        blind = lambda: pytest.fail("rank 1 decided on its own view")  # noqa: E731
        received["plan"] = agreed_plan(blind, tmp_path, timeout=60, environ=rank_1)

    waiting = threading.Thread(target=take)
    waiting.start()  # waits for a plan rank 0 has not made yet
    assert agreed_plan(lambda: resumed, tmp_path, 60, rank_0) == resumed
    waiting.join(timeout=60)
    assert received["plan"] == resumed
    written = list(tmp_path.glob(".plans/*.json"))
    assert written == ([plan_file(tmp_path, launch_key(SRUN))] if launcher == "srun" else [])


def test_rank_0s_refusal_is_every_ranks_and_a_missing_plan_names_the_run_folder(tmp_path):
    def refuse() -> RunPlan:
        raise ConfigError("inconsistent settings: model.h=3")

    with pytest.raises(ConfigError, match="model.h=3"):
        agreed_plan(refuse, tmp_path, 60, {**SRUN, "SLURM_PROCID": "0"})
    with pytest.raises(RankRefused, match="global rank 0 refused the run.*ConfigError.*model.h=3"):
        agreed_plan(refuse, tmp_path, 60, SRUN)  # rank 1 reads it, never decides
    requeued = {**SRUN, "SLURM_RESTART_COUNT": "1"}  # a plan not written (yet)
    with pytest.raises(TimeoutError, match=r"the same run folder \(hydra.run.dir\)"):
        agreed_plan(refuse, tmp_path, 0, requeued)


def getting_ready(environ: dict[str, str], fails: bool, timeout: float = 60) -> str:
    """What stopped this rank as it got ready to train ("" if it and every other rank did)."""
    try:
        with start_handed_over(".", timeout, environ):
            if fails:
                raise OSError(f"rank {environ.get('RANK', environ.get('SLURM_PROCID'))} fault")
    except (OSError, RankRefused, TimeoutError) as error:
        return f"{type(error).__name__}: {error}"
    return ""


def both_getting_ready(ranks: list[dict[str, str]], failing: int | None) -> list[str]:
    """Each of the 2 ranks' `getting_ready`, side by side; rank `failing`'s block raising."""
    told = {}
    other = threading.Thread(target=lambda: told.update(one=getting_ready(ranks[1], failing == 1)))
    other.start()
    zero = getting_ready(ranks[0], failing == 0)
    other.join(timeout=60)
    return [zero, told["one"]]


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
def test_a_rank_failing_to_get_ready_stops_every_rank_naming_it_whichever_it_is(
    tmp_path, monkeypatch, launcher
):
    """srun: files in the run folder; torchrun: its agent's store. Each start of the job (a
    requeue, a torchrun restart) has its own roll call."""
    monkeypatch.chdir(tmp_path)  # the run folder
    if launcher == "srun":
        ranks, restart = [{**SRUN, "SLURM_PROCID": str(r)} for r in (0, 1)], "SLURM_RESTART_COUNT"
    else:
        agent = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        ranks = [{**torchrun(agent.port), "RANK": str(r), "LOCAL_RANK": str(r)} for r in (0, 1)]
        restart = "TORCHELASTIC_RESTART_COUNT"
    for start, failing in enumerate((1, 0)):
        told = both_getting_ready([{**r, restart: str(start)} for r in ranks], failing)
        assert told[failing] == f"OSError: rank {failing} fault"
        assert told[1 - failing] == (
            f"RankRefused: global rank {failing} failed before training started, so every rank "
            f"stops: OSError: rank {failing} fault"
        )
    assert both_getting_ready([{**r, restart: "2"} for r in ranks], None) == ["", ""]
    missing = "global rank(s) 1" if launcher == "srun" else "1 of 2 ranks"
    assert getting_ready({**ranks[0], restart: "3"}, False, timeout=1) == (
        f"TimeoutError: {missing} reported neither ready to train nor failed within 1 s: see "
        "that rank's log for why it stopped"
    )


def failing_in_fit(environ: dict[str, str], error: BaseException, started: bool = False) -> str:
    """What this rank raises when `error` stops its fit; with whose error it was raised from."""
    try:
        with refusals_handed_over(".", 60, lambda: started, environ):
            raise error
    except (OSError, RuntimeError) as raised:
        return f"{type(raised).__name__}: {raised} <- {raised.__cause__!r}"
    return ""


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
def test_the_first_rank_to_fail_before_its_first_step_is_named_by_the_others(
    tmp_path, monkeypatch, launcher
):
    """Rank 1 fails in fit, then rank 0's collective breaks as rank 1 exits: rank 0 names rank 1,
    from the broken connection; after the first step each rank's error is its own."""
    monkeypatch.chdir(tmp_path)  # the run folder
    if launcher == "srun":
        ranks = [{**SRUN, "SLURM_PROCID": str(r)} for r in (0, 1)]
    else:
        agent = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        ranks = [{**torchrun(agent.port), "RANK": str(r), "LOCAL_RANK": str(r)} for r in (0, 1)]
    broken = RuntimeError("Connection closed by peer")
    assert failing_in_fit(ranks[1], OSError("rank 1 fault")) == "OSError: rank 1 fault <- None"
    assert failing_in_fit(ranks[0], broken) == (
        "RankRefused: global rank 1 failed before training started, so every rank stops: "
        "OSError: rank 1 fault <- RuntimeError('Connection closed by peer')"
    )
    assert failing_in_fit(ranks[0], OSError("rank 0 fault")) == (
        "RankRefused: global rank 1 failed before training started, so every rank stops: "
        "OSError: rank 1 fault <- OSError('rank 0 fault')"
    )  # the first refusal stands
    fresh = "SLURM_RESTART_COUNT" if launcher == "srun" else "TORCHELASTIC_RESTART_COUNT"
    after_a_step = failing_in_fit({**ranks[0], fresh: "1"}, broken, started=True)
    assert after_a_step == "RuntimeError: Connection closed by peer <- None"
    assert failing_in_fit({**ranks[0], fresh: "1"}, OSError("rank 0 fault")) == (
        "OSError: rank 0 fault <- None"
    )  # nothing reported after the step


def test_a_rank_lightning_starts_takes_its_parents_plan_and_no_other(tmp_path, monkeypatch):
    monkeypatch.setenv(PLAN_ENV, "")
    plan = plan_run(compose_train(tmp_path, TOY))
    decided_alone = dataclasses.replace(plan, precision="bf16-mixed")
    for parent, expected in ((os.getppid(), plan), (os.getppid() + 1, decided_alone)):
        handed = json.dumps({"pid": parent, "plan": plan.to_dict()})
        environ = {"LOCAL_RANK": "1", PLAN_ENV: handed}  # as Lightning's launcher starts rank 1
        assert agreed_plan(lambda: decided_alone, tmp_path, 0, environ) == expected


@pytest.mark.slow
def test_a_rank_blind_to_last_ckpt_resumes_beside_the_others(tmp_path):
    """Rank 1 of 2 sees no last.ckpt (a stale shared-file-system view): it resumes all the same."""
    run, starts = tmp_path / "run", tmp_path / "starts"
    command = [
        sys.executable, "train.py", *quick_toy_run(2), "logger=none", "trainer=ddp_cpu",
        f"paths.log_dir={tmp_path}",
        f"paths.cache_dir={tmp_path}/cache", f"hydra.run.dir={run}", *start_per_rank(starts),
    ]  # fmt: skip
    subprocess.run(command, cwd=ROOT, env=ddp_env(), check=True, timeout=300, capture_output=True)
    last = run / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 2

    stale = {**ddp_env()}
    stale["PYTHONPATH"] = f"{ROOT / 'tests' / 'helpers' / 'stale_view'}:{stale['PYTHONPATH']}"
    look = f"import pathlib; print(pathlib.Path('{last}').is_file())"
    for rank, sees in (("0", "True"), ("1", "False")):  # the injection itself
        shown = subprocess.run(
            [sys.executable, "-c", look], env={**stale, "LOCAL_RANK": rank},
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        assert shown.strip() == sees
    resumed = [*command, "trainer.max_steps=4"]
    done = subprocess.run(resumed, cwd=ROOT, env=stale, timeout=300, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        assert json.loads((starts / f"rank{rank}.json").read_text()) == {"global_step": 2}
    saved = torch.load(last, weights_only=True)
    assert saved["global_step"] == 4
    assert saved["run_plan"]["resume_from"] == str(last) and saved["run_plan"]["world_size"] == 2


@pytest.mark.slow
def test_a_finished_run_leaves_no_plan_for_the_ranks_of_a_later_run_it_starts(
    tmp_path, monkeypatch
):
    """Rank 0 hands its plan to the ranks it starts through its environment; after the run, a
    process this one starts (another run's srun-like rank) must not take that plan as its own."""
    monkeypatch.delenv(PLAN_ENV, raising=False)
    train(compose_train(tmp_path, [*quick_toy_run(2), "logger=none"]))
    assert PLAN_ENV not in os.environ


def test_the_trainer_module_data_and_callbacks_take_the_plan_not_the_config(tmp_path):
    """What the run decided reaches every component from the plan: a config whose copies are
    changed after planning changes nothing, and a plan changed after planning is what they run."""
    from transformer_nmt.train import build_data_and_module, build_trainer
    from transformer_nmt.training.callbacks.checkpoint_policy import CheckpointPolicy
    from transformer_nmt.training.callbacks.timed_cooldown import TimedCooldown
    from transformer_nmt.training.plan.resume import ResumePoint
    from transformer_nmt.training.run.time_budget import TimeBudget

    cfg = compose_train(tmp_path, TOY)
    plan = dataclasses.replace(
        plan_run(cfg),
        max_steps=70,
        max_time="00:01:00:00",
        cooldown_steps=30,
        cooldown_minutes=5,
        keep_last=9,
        precision="bf16-mixed",
        accumulate_grad_batches=3,
        max_tokens=500,
        tokens_per_update=1500,
    )
    poison = {
        "trainer.max_steps": 11,
        "trainer.max_time": "00:00:01:00",
        "trainer.precision": "16-mixed",
        "trainer.accumulate_grad_batches": 5,
        "module.cooldown_steps": 2,
        "callbacks.checkpoints.keep_last": 1,
        "callbacks.timed_cooldown.minutes": 1,
        "data.max_tokens": 400,
        "data.tokens_per_update": 4000,
    }
    for key, value in poison.items():
        OmegaConf.update(cfg, key, value)
    datamodule, module = build_data_and_module(cfg, plan, ResumePoint(None))
    trainer = build_trainer(cfg, [], plan)
    (policy,) = [c for c in trainer.callbacks if isinstance(c, CheckpointPolicy)]
    (timed,) = [c for c in trainer.callbacks if isinstance(c, TimedCooldown)]
    (budget,) = [c for c in trainer.callbacks if isinstance(c, TimeBudget)]
    assert (trainer.max_steps, trainer.precision, trainer.accumulate_grad_batches) == (
        70,
        "bf16-mixed",
        3,
    )
    assert budget.time_remaining() == 3600  # the plan's budget, ended by the agreed votes
    assert (module.hparams.cooldown_steps, datamodule.max_tokens) == (30, 500)
    assert datamodule.hparams.tokens_per_update == 1500  # as checkpoints record the data
    assert (policy.keep_last, timed.minutes) == (9, 5)
