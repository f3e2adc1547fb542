"""On a real single-node SLURM (tests/helpers/slurm_cluster.py): sweep trials as jobs through
Hydra's submitit launcher, and docs/cluster.md's training recipe requeued, resuming in its
folder."""

import csv
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import torch
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from helpers import wandb_records
from helpers.ddp import assert_same_weights, ddp_env, weights_callback
from helpers.hydra_compose import ROOT
from helpers.pause_until_signal import pause_until_signal
from helpers.quick_toy_run import quick_toy_run
from helpers.slurm_cluster import missing_binaries
from helpers.sweep_runs import TOY_SPACE, train_command

missing = missing_binaries()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(missing),
        reason=f"SLURM is not installed (no {', '.join(missing)}): "
        "apt-get install slurmctld slurmd slurm-client munge, as .ci/run does",
    ),
]
TIMEOUT = 900


def test_submitit_slurm_runs_each_trial_as_a_job_of_one_study(tmp_path, cluster):
    study = "multi30k_de_en"
    search = [f"hparams_search={study}", *TOY_SPACE, "hydra.sweeper.n_trials=2"]
    jobs = ["hydra/launcher=submitit_slurm", "hydra.sweeper.n_jobs=2"]
    run = subprocess.run(
        train_command(tmp_path, [*search, *jobs]),
        cwd=ROOT,
        env={**ddp_env(), "SLURM_CONF": cluster.env["SLURM_CONF"]},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert run.returncode == 0, run.stderr[-3000:] + cluster.log_tails()

    sweep = tmp_path / "toy" / "sweeps" / study
    storage = JournalStorage(JournalFileBackend(str(sweep / "optuna.journal")))
    trials = optuna.load_study(study_name=study, storage=storage).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert sorted(p.name for p in sweep.iterdir() if p.name.isdigit()) == ["0", "1"]
    # One job array, a task of it per trial: submitit's folder per task, Slurm's record of each.
    tasks = sorted(
        p.name for p in (sweep / ".submitit").iterdir() if re.fullmatch(r"\d+_\d+", p.name)
    )
    assert [t.split("_")[1] for t in tasks] == ["0", "1"]
    ended = [cluster.wait_until_ended(t, TIMEOUT)["JobState"] for t in tasks]
    assert ended == ["COMPLETED", "COMPLETED"]


# docs/cluster.md's sbatch script with the sizes of a 2-core CPU box: 2 ranks over gloo on one node.
CPU_BOX = {
    "--nodes=2": "--nodes=1",
    "--ntasks-per-node=4": "--ntasks-per-node=2",
    "#SBATCH --gres=gpu:4\n": "",
    "--cpus-per-task=8": "--cpus-per-task=1",
    "model=base trainer=ddp trainer.devices=4 trainer.num_nodes=2": (
        "trainer=ddp_cpu trainer.devices=2 trainer.num_nodes=1"
    ),
}
MAX_STEPS = 12
# The toy task, seconds a run: epochs of ~7 steps a rank, validation on one batch.
TOY = quick_toy_run(MAX_STEPS)
REQUEUED_AT, SIGNALLED_AT = 4, 8  # the steps the job is held at until requeued, then signalled


def documented_sbatch_script() -> str:
    """docs/cluster.md's SLURM script, the fenced block that starts with #!/bin/bash."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "cluster.md").read_text(), re.DOTALL)
    (script,) = [b for b in blocks if b.startswith("#!/bin/bash\n") and "#SBATCH" in b]
    return script


def on_a_cpu_box(script: str, tmp_path: Path) -> str:
    """The script with CPU_BOX's sizes, the toy task, every output under tmp_path, and two
    pauses of rank 0 (rank 1 waits in the step's collectives): at REQUEUED_AT until SIGTERM, at
    SIGNALLED_AT until USR1."""
    for documented, cpu in CPU_BOX.items():
        assert script.count(documented) == 1, f"docs/cluster.md's sbatch lacks {documented!r}"
        script = script.replace(documented, cpu)
    overrides = [
        *TOY,
        f"paths.log_dir={tmp_path}/outputs",
        f"paths.cache_dir={tmp_path}/cache",
        *pause_until_signal("requeued", REQUEUED_AT, tmp_path),
        *pause_until_signal("signalled", SIGNALLED_AT, tmp_path),
    ]
    srun = "srun python train.py "
    assert script.count(srun) == 1 and "hydra.run.dir=outputs/" in script
    script = script.replace("hydra.run.dir=outputs/", f"hydra.run.dir={tmp_path}/outputs/")
    return script.replace(srun, srun + " ".join(shlex.quote(o) for o in overrides) + " ")


@pytest.fixture(scope="module")
def recipe_job(cluster, tmp_path_factory) -> dict:
    """The documented job, requeued by `scontrol requeue` at one step and by USR1 at another."""
    tmp_path = tmp_path_factory.mktemp("recipe")
    script = tmp_path / "train.sbatch"
    script.write_text(on_a_cpu_box(documented_sbatch_script(), tmp_path))
    env = ddp_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    output = f"--output={tmp_path}/slurm-%j.out"
    job = cluster.sbatch(script, output, "--open-mode=append", cwd=ROOT, env=env)
    output = tmp_path / f"slurm-{job}.out"
    cluster.wait_until_held(job, tmp_path / f"paused_at_{REQUEUED_AT}", output, TIMEOUT)
    cluster.run("scontrol", "requeue", str(job))
    cluster.wait_until_held(job, tmp_path / f"paused_at_{SIGNALLED_AT}", output, TIMEOUT)
    cluster.run("scancel", "--signal=USR1", str(job))  # as --signal=USR1@N does: to the tasks
    record = cluster.wait_until_ended(job, TIMEOUT)
    runs = tmp_path / "outputs" / "train" / "runs"
    return {
        "id": job,
        "record": record,
        "runs": sorted(p.name for p in runs.iterdir()),
        "run": runs / f"slurm-{job}",
    }


def logged_steps(run: Path) -> list[list[int]]:
    """The training steps each start of the run logged (the CSV logger's version_<n>)."""
    starts = sorted(run.glob("csv/version_*/metrics.csv"), key=lambda p: int(p.parent.name[8:]))
    return [
        sorted({int(row["step"]) for row in csv.DictReader(p.open()) if row["train/loss"]})
        for p in starts
    ]


def test_the_documented_recipe_requeued_resumes_where_it_was_in_its_run_folder(recipe_job):
    job, run = recipe_job["id"], recipe_job["run"]
    assert recipe_job["runs"] == [f"slurm-{job}"]  # one folder: the requeued job's id kept
    log = (run / "train.log").read_text()
    last = run / "checkpoints" / "last.ckpt"
    # SIGTERM from the requeue: the held step runs, then last.ckpt is saved after it.
    stopped = log.index(f"SIGTERM at step {REQUEUED_AT + 1}: saved {last}")
    restarted = log.index(f"SLURM job {job}, restart 1")  # SLURM_RESTART_COUNT=1
    assert stopped < log.index(f"Resuming from {last}", stopped) < restarted
    first, second, _ = logged_steps(run)
    assert first == list(range(REQUEUED_AT + 1))
    assert second == list(range(REQUEUED_AT + 1, SIGNALLED_AT + 1))  # on from the saved step


def test_usr1_saves_last_ckpt_and_requeues_the_job_which_ends_completed(recipe_job):
    job, run = recipe_job["id"], recipe_job["run"]
    log = (run / "train.log").read_text()
    last = run / "checkpoints" / "last.ckpt"
    # Rank 0 held between steps, rank 1 inside the step's collectives: one stop, one last.ckpt.
    stopped = log.index(f"SIGUSR1 at step {SIGNALLED_AT + 1}: saved {last}")
    assert f"SIGUSR1: every rank stops after update {SIGNALLED_AT + 1}" in log
    assert [p.name for p in last.parent.glob("last*")] == ["last.ckpt"]
    requeued = log.index(f"SIGUSR1: saved last.ckpt and requeued SLURM job {job}", stopped)
    assert requeued < log.index(f"SLURM job {job}, restart 2", requeued)
    *_, third = logged_steps(run)
    assert third == list(range(SIGNALLED_AT + 1, MAX_STEPS))
    assert not list(run.rglob("hpc_ckpt_*"))  # Lightning's auto-requeue is off: one resume source
    record = recipe_job["record"]
    assert (record["JobState"], record["Restarts"], record["ExitCode"]) == ("COMPLETED", "2", "0:0")


def test_a_requeued_job_resumes_in_its_default_run_folder_into_one_w_and_b_run(cluster, tmp_path):
    """Without hydra.run.dir the run folder is the job's, runs/slurm-<job>: `scontrol requeue`
    at step 4 starts the same command again there, which resumes from its last.ckpt and logs to
    the same W&B run, each step once."""
    overrides = [
        *(o for o in TOY if o != "logger=csv"),
        "logger=wandb",
        f"paths.log_dir={tmp_path}/outputs",
        f"paths.cache_dir={tmp_path}/cache",
        *pause_until_signal("requeued", REQUEUED_AT, tmp_path),
    ]
    script = tmp_path / "train.sbatch"
    command = shlex.join(["srun", "python", "train.py", *overrides])
    script.write_text(f"#!/bin/bash\n#SBATCH --cpus-per-task=1\n#SBATCH --requeue\n{command}\n")
    env = {**ddp_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    env.update(wandb_records.FLUSH_EVERY_SECOND)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    output = f"--output={tmp_path}/slurm-%j.out"
    job = cluster.sbatch(script, output, "--open-mode=append", cwd=ROOT, env=env)
    output = tmp_path / f"slurm-{job}.out"
    cluster.wait_until_held(job, tmp_path / f"paused_at_{REQUEUED_AT}", output, TIMEOUT)
    runs = tmp_path / "outputs" / "toy" / "runs"
    run = runs / f"slurm-{job}"
    # The SIGTERM ends W&B's service too: what it has not written by then is lost.
    wandb_records.wait_until_written(run, REQUEUED_AT - 1)
    cluster.run("scontrol", "requeue", str(job))
    record = cluster.wait_until_ended(job, TIMEOUT)
    ended = (record["JobState"], record["Restarts"])
    assert ended == ("COMPLETED", "1"), output.read_text()[-3000:]

    assert [p.name for p in runs.iterdir()] == [f"slurm-{job}"]
    assert f"Resuming from {run / 'checkpoints' / 'last.ckpt'}" in (run / "train.log").read_text()
    ids, steps = wandb_records.loss_curve(run)
    assert len(ids) == 1 and len(list((run / "wandb").glob("offline-run-*"))) == 2
    assert steps == list(range(MAX_STEPS))


def test_srun_torchrun_inside_sbatch_trains_two_ranks_to_the_end(cluster, tmp_path):
    """Lightning picks TorchElastic's environment over SLURM's: 2 torchrun ranks in 1 task."""
    overrides = [
        *TOY, "logger=none", "trainer=ddp_cpu", "trainer.devices=2",
        f"paths.log_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache",
        f"hydra.run.dir={tmp_path}/run", *weights_callback(tmp_path / "weights"),
    ]  # fmt: skip
    script = tmp_path / "torchrun.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=2\n"
        f"srun {shlex.quote(sys.executable)} -m torch.distributed.run --standalone "
        f"--nproc_per_node=2 train.py {' '.join(shlex.quote(o) for o in overrides)}\n"
    )
    output = tmp_path / "slurm.out"
    job = cluster.sbatch(script, f"--output={output}", cwd=ROOT, env=ddp_env())
    record = cluster.wait_until_ended(job, TIMEOUT)
    assert record["JobState"] == "COMPLETED", output.read_text()[-3000:]
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == MAX_STEPS
    assert_same_weights(tmp_path / "weights")
