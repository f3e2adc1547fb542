"""Run folders and logs that stay apart where processes start together (the tasks of a SLURM job
array, the ranks of a run) and stay the same where a job starts again (a requeued SLURM job)."""

import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from helpers.ddp import ddp_env
from helpers.hydra_compose import ROOT, compose_train
from helpers.quick_toy_run import quick_toy_run
from helpers.slurm_cluster import missing_binaries
from transformer_nmt.runtime.run_names import rank_log_suffix, slurm_run_folder

LAUNCHER_VARIABLES = (
    "RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID", "SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
)  # fmt: skip


@pytest.mark.parametrize(
    ("environ", "folder"),
    [
        ({}, "2026-01-02_03-04-05"),
        ({"SLURM_JOB_ID": "40"}, "slurm-40"),
        ({"SLURM_JOB_ID": "40", "SLURM_RESTART_COUNT": "2"}, "slurm-40"),  # requeued: the same
        (
            {"SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "41", "SLURM_ARRAY_TASK_ID": "1"},
            "slurm-41_1",
        ),
    ],
)
def test_a_slurm_jobs_run_folder_is_named_by_its_job_or_array_task_not_its_start(environ, folder):
    assert slurm_run_folder("2026-01-02_03-04-05", environ) == folder


@pytest.mark.parametrize(
    ("environ", "log"),
    [
        ({}, "train.log"),
        ({"RANK": "0", "LOCAL_RANK": "0"}, "train.log"),  # torchrun
        ({"RANK": "3", "LOCAL_RANK": "1"}, "train.rank3.log"),
        ({"LOCAL_RANK": "1"}, "train.rank1.log"),  # started by Lightning's launcher
        ({"NODE_RANK": "1", "LOCAL_RANK": "0"}, "train.rank1.0.log"),
        ({"SLURM_PROCID": "0"}, "train.log"),
        ({"SLURM_PROCID": "2"}, "train.rank2.log"),
    ],
)
def test_each_rank_logs_to_a_file_of_its_own(environ, log):
    assert f"train{rank_log_suffix(environ)}.log" == log


def test_the_composed_config_names_the_run_folder_and_the_log_so(tmp_path, monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in {"SLURM_ARRAY_JOB_ID": "41", "SLURM_ARRAY_TASK_ID": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOCAL_RANK", "1")
    hydra = compose_train(tmp_path, ["experiment=toy"]).hydra
    assert hydra.run.dir == f"{tmp_path}/outputs/toy/runs/slurm-41_1"
    assert hydra.job_logging.handlers.file.filename == f"{tmp_path}/run/train.rank1.log"
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    hydra = compose_train(tmp_path, ["experiment=toy"]).hydra  # outside SLURM: by its start
    assert re.fullmatch(r".*/toy/runs/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", hydra.run.dir)
    assert hydra.job_logging.handlers.file.filename == f"{tmp_path}/run/train.log"


@pytest.mark.slow
@pytest.mark.skipif(bool(missing_binaries()), reason="SLURM is not installed (see test_slurm.py)")
def test_the_two_tasks_of_a_job_array_train_in_run_folders_of_their_own(tmp_path, cluster):
    overrides = [*quick_toy_run(2), f"paths.log_dir={tmp_path}/outputs"]
    script = tmp_path / "array.sbatch"
    command = shlex.join(["python", "train.py", *overrides, f"paths.cache_dir={tmp_path}/cache"])
    script.write_text(f"#!/bin/bash\n#SBATCH --cpus-per-task=1\n{command}\n")
    env = ddp_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    output = f"--output={tmp_path}/slurm-%a.out"
    job = cluster.sbatch(script, "--array=0-1", output, cwd=ROOT, env=env)
    ended = [cluster.wait_until_ended(f"{job}_{task}")["JobState"] for task in (0, 1)]
    outputs = "".join(p.read_text()[-2000:] for p in tmp_path.glob("slurm-*.out"))
    assert ended == ["COMPLETED", "COMPLETED"], outputs

    runs = sorted((tmp_path / "outputs" / "toy" / "runs").iterdir())
    assert [run.name for run in runs] == [f"slurm-{job}_0", f"slurm-{job}_1"]
    for run in runs:
        assert (run / "checkpoints" / "last.ckpt").is_file()
