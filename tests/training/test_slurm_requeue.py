"""USR1 in a SLURM job takes the SIGTERM path, and Lightning's own auto-requeue is off; outside
SLURM nothing changes. tests/test_slurm.py runs the whole path on a real cluster."""

import signal

import pytest
from lightning.fabric.plugins.environments import SLURMEnvironment

from transformer_nmt.training.slurm_requeue import requeue_on_signal, slurm_environment

A_JOB = {
    "SLURM_JOB_ID": "7",
    "SLURM_NTASKS": "2",
    "SLURM_NTASKS_PER_NODE": "2",
    "SLURM_JOB_NAME": "train.sbatch",
}


@pytest.fixture
def in_a_slurm_job(monkeypatch):
    for name, value in A_JOB.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SLURM_PROCID", "1")  # not rank 0: no `scontrol requeue` from here


@pytest.fixture
def sigterms():
    """The SIGTERMs this process receives while the test runs, as Lightning's handler would."""
    received = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    yield received
    signal.signal(signal.SIGTERM, previous)


def test_lightning_s_auto_requeue_is_off_where_slurm_runs_the_ranks(in_a_slurm_job):
    (environment,) = slurm_environment()
    assert isinstance(environment, SLURMEnvironment) and not environment.auto_requeue


def test_usr1_arrives_as_sigterm_in_a_slurm_job_and_is_restored_after(in_a_slurm_job, sigterms):
    before = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(SystemExit), requeue_on_signal():
        signal.raise_signal(signal.SIGUSR1)
        assert sigterms == [signal.SIGTERM]
        raise SystemExit(143)  # as `train` ends after saving
    assert signal.getsignal(signal.SIGUSR1) == before


def test_outside_slurm_nothing_changes(monkeypatch, sigterms):
    for name in A_JOB:
        monkeypatch.delenv(name, raising=False)
    assert slurm_environment() == []
    before = signal.getsignal(signal.SIGUSR1)
    with requeue_on_signal():
        assert signal.getsignal(signal.SIGUSR1) == before
