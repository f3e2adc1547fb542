"""Under torchrun, the run warns at start when torchrun would cut the stop short of its time."""

import json
import subprocess
import sys

import pytest

from helpers.ddp import ddp_env
from helpers.loopback import free_ports
from transformer_nmt.training.run.stop import STOP_SECONDS, torchrun_stop_problems

SHOW = (
    "import json; from transformer_nmt.training.run.stop import torchrun_stop_problems as p; "
    "print(json.dumps(p()))"
)
TORCHRUN = {"TORCHELASTIC_RUN_ID": "none", "LOCAL_RANK": "0"}


def test_outside_torchrun_nothing_is_said():
    assert torchrun_stop_problems({"SLURM_JOB_ID": "7"}, ["python", "train.py"]) == []


def test_torchruns_defaults_are_named_with_the_options_that_give_the_stop_its_time():
    usr1, shutdown = torchrun_stop_problems({**TORCHRUN, "SLURM_JOB_ID": "7"}, ["torchrun"])
    assert "add --signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 to torchrun" in usr1
    assert shutdown.startswith("torchrun kills the ranks 30 s after it forwards a stop signal")
    assert f"--shutdown-timeout={STOP_SECONDS}" in shutdown
    assert len(torchrun_stop_problems(TORCHRUN, ["torchrun"])) == 1  # USR1 is SLURM's alone


@pytest.mark.parametrize(
    ("environ", "command"),
    [
        ({}, ["torchrun", f"--shutdown-timeout={STOP_SECONDS}", "train.py"]),
        ({}, ["torchrun", "--shutdown_timeout", "600", "train.py"]),
        ({"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "300"}, ["torchrun", "train.py"]),
        ({"PET_SHUTDOWN_TIMEOUT": "300"}, ["torchrun", "train.py"]),
    ],
)
def test_a_long_enough_shutdown_timeout_is_found_on_the_command_line_or_in_the_environment(
    environ, command
):
    assert torchrun_stop_problems({**TORCHRUN, **environ}, command) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([], 2),
        ([f"--shutdown-timeout={STOP_SECONDS}", "--signals-to-handle=SIGTERM,SIGUSR1"], 0),
    ],
)
def test_a_rank_torchrun_starts_reads_torchruns_own_options(options, expected):
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1",
        f"--master_port={free_ports(1)[0]}", *options, "--no-python", sys.executable, "-c", SHOW,
    ]  # fmt: skip
    shown = subprocess.run(
        command, env={**ddp_env(), "SLURM_JOB_ID": "7"}, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr[-3000:]
    problems = json.loads(shown.stdout.strip().splitlines()[-1])  # what the rank found
    assert len(problems) == expected, problems
