"""Which job USR1 requeues and from which rank; Lightning's own choice of cluster environment,
so that `srun torchrun` works. tests/test_slurm.py runs the whole path on a real cluster."""

import logging

import pytest
from lightning.fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

from helpers.hydra_compose import compose_train
from transformer_nmt.train import build_trainer
from transformer_nmt.training.plan.run_plan import plan_run
from transformer_nmt.training.run.slurm_requeue import requeue_this_job, slurm_job

A_JOB = {
    "SLURM_JOB_ID": "7",
    "SLURM_NTASKS": "1",
    "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_JOB_NAME": "train.sbatch",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
}
TORCHRUN = {
    "TORCHELASTIC_RUN_ID": "none",
    "RANK": "0",
    "LOCAL_RANK": "0",
    "WORLD_SIZE": "1",
    "LOCAL_WORLD_SIZE": "1",
    "GROUP_RANK": "0",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}


def test_a_job_array_task_is_requeued_as_its_task():
    assert slurm_job(A_JOB) == "7"
    array = {**A_JOB, "SLURM_ARRAY_JOB_ID": "5", "SLURM_ARRAY_TASK_ID": "2"}
    assert slurm_job(array) == "5_2"
    assert slurm_job({}) is None


def test_only_global_rank_0_of_a_job_requeues_and_outside_slurm_nothing_does(caplog):
    # Neither reaches `scontrol`, which this machine need not have: rank 1 leaves it to rank 0.
    with caplog.at_level(logging.WARNING):
        requeue_this_job({**A_JOB, "SLURM_PROCID": "1"})
        assert caplog.messages == []
        requeue_this_job({})
    assert caplog.messages == ["SIGUSR1 outside a SLURM job: stopped, nothing to requeue"]


@pytest.mark.parametrize(
    "launched_by, environment",
    [({}, SLURMEnvironment), (TORCHRUN, TorchElasticEnvironment)],
    ids=["srun", "srun torchrun"],
)
def test_torchrun_inside_a_slurm_job_uses_torchelastic_s_environment(
    tmp_path, monkeypatch, launched_by, environment
):
    for name, value in {**A_JOB, **launched_by}.items():
        monkeypatch.setenv(name, value)
    cfg = compose_train(tmp_path, ["experiment=toy", "logger=none", "trainer.precision=32-true"])
    trainer = build_trainer(cfg, [], plan_run(cfg))
    assert type(trainer._accelerator_connector.cluster_environment) is environment
