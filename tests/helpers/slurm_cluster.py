"""A real single-node SLURM for tests: Debian's munged, slurmctld and slurmd (`.ci/run` installs
them) on this machine's loopback, every file (config, munge key and socket, state, spool, logs)
in a temporary folder. No cgroups: processes are tracked through /proc and tasks are not bound.
"""

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from helpers.loopback import free_ports
from helpers.polling import poll
from helpers.sweep_runs import wait_for

BINARIES = ("mungekey", "munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "squeue")
NODE = "localhost"  # resolves on any machine: Lightning's SLURMEnvironment joins ranks at it
# Seconds a requeued job waits before it may start again; Slurm's default is 120.
CRED_EXPIRE = 5
START_TIMEOUT = 120
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "DEADLINE"}


# The daemons live in sbin, which a user's PATH may lack.
PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def missing_binaries() -> list[str]:
    """The SLURM and munge programs this machine lacks."""
    return [name for name in BINARIES if shutil.which(name, path=PATH) is None]


def _hardware(env: dict[str, str]) -> str:
    """This machine's CPUs and memory as `slurmd -C` reports them, less its NodeName."""
    first = subprocess.run(["slurmd", "-C"], env=env, capture_output=True, text=True, check=True)
    fields = first.stdout.splitlines()[0].split()
    return " ".join(f for f in fields if not f.startswith("NodeName="))


def slurm_conf(folder: Path, user: str, env: dict[str, str]) -> str:
    controller_port, node_port = free_ports(2)
    node = f"{NODE} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 {_hardware(env)}"
    return f"""\
ClusterName=nmt-tests
SlurmctldHost={NODE}(127.0.0.1)
SlurmctldPort={controller_port}
SlurmdPort={node_port}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge/socket,cred_expire={CRED_EXPIRE}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
# Pending jobs are looked at every second, not every minute: a requeued job starts at once.
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
NodeName={node} State=UNKNOWN
PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    """A running cluster: `env` (with SLURM_CONF) reaches it from any client or job."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = {**os.environ, "PATH": PATH, "SLURM_CONF": str(folder / "slurm.conf")}

    def run(self, *command: str) -> str:
        """A client command's output; CalledProcessError (with its stderr) if it fails."""
        done = subprocess.run(command, env=self.env, capture_output=True, text=True)
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, command, done.stdout, done.stderr)
        return done.stdout

    def sbatch(self, script: Path, *options: str, cwd: Path, env: dict[str, str]) -> int:
        """Submits `script` as a user would from `cwd` with `env` (which the job inherits)."""
        command = ["sbatch", "--parsable", *options, str(script)]
        submit = {**env, "SLURM_CONF": self.env["SLURM_CONF"]}
        done = subprocess.run(command, cwd=cwd, env=submit, capture_output=True, text=True)
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, command, done.stdout, done.stderr)
        return int(done.stdout)

    def job(self, job_id: int | str) -> dict[str, str]:
        """`scontrol show job`'s fields of a job, or of an array's task `<id>_<index>`."""
        fields = self.run("scontrol", "show", "job", "--oneliner", str(job_id)).split()
        return dict(f.split("=", 1) for f in fields if "=" in f)

    def wait_until_ended(self, job_id: int | str, timeout: float = 600) -> dict[str, str]:
        """The job's fields once it has ended (JobState COMPLETED, FAILED, ...)."""

        def ended() -> dict[str, str] | None:
            job = self.job(job_id)
            return job if job["JobState"] in ENDED else None

        return poll(ended, timeout, lambda: f"job {job_id}: {self.job(job_id)['JobState']}", 0.2)

    def wait_until_held(self, job: int, marker: Path, output: Path, timeout: float = 900) -> None:
        """Until the job writes `marker`; fails at once, showing its output, if it ends first."""
        deadline = time.monotonic() + timeout
        while not marker.exists():
            state = self.job(job)["JobState"]
            if state in ENDED or time.monotonic() > deadline:
                tail = output.read_text()[-3000:] if output.exists() else ""
                raise AssertionError(f"job {job} {state} before {marker.name}:\n{tail}")
            time.sleep(0.2)

    def log_tails(self) -> str:
        """The end of each daemon's log: what a failing test shows."""
        logs = sorted((self.folder / "log").glob("*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in logs)

    def wait_until_idle(self) -> None:
        """Until the controller answers and the node is idle, ready for jobs."""

        def idle() -> bool:
            try:
                return self.run("sinfo", "--noheader", "--format=%t").split() == ["idle"]
            except subprocess.CalledProcessError:
                return False  # the controller is not listening yet

        poll(idle, START_TIMEOUT, lambda: f"SLURM is not up\n{self.log_tails()}", 0.2)

    def cancel_all_jobs(self) -> None:
        """Cancels every job and waits until none is queued or running, its processes gone."""
        self.run("scancel", "--partition=debug")
        queue = lambda: self.run("squeue", "--noheader", "--format=%i %T")  # noqa: E731
        poll(lambda: not queue().strip(), START_TIMEOUT, lambda: f"jobs left: {queue()}", 0.2)


def _daemon(stack: ExitStack, command: list[str], env: dict[str, str], log: Path) -> None:
    """Starts `command` in the foreground of a child; on exit, SIGTERM and wait for it."""
    with log.open("a") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    stack.callback(stop)


@contextmanager
def slurm_cluster() -> Iterator[SlurmCluster]:
    """Runs munged, slurmctld and slurmd for the duration; yields the cluster, idle."""
    # Not under pytest's tmp_path: munged checks that every folder above its socket is safe.
    folder = Path(tempfile.mkdtemp(prefix="nmt-slurm-"))
    folder.chmod(0o755)  # munged: the socket's folder must be reachable by every user
    for name in ("munge", "state", "spool", "log"):
        (folder / name).mkdir()
    cluster = SlurmCluster(folder)
    user = pwd.getpwuid(os.getuid()).pw_name
    (folder / "slurm.conf").write_text(slurm_conf(folder, user, cluster.env))
    munge = folder / "munge"
    try:
        cluster.run("mungekey", "--create", f"--keyfile={munge}/key")
        with ExitStack() as stack:
            munged = [
                "munged",
                "--foreground",
                f"--socket={munge}/socket",
                f"--key-file={munge}/key",
                f"--pid-file={munge}/pid",
                f"--seed-file={munge}/seed",
                f"--log-file={folder}/log/munged.log",
            ]
            _daemon(stack, munged, cluster.env, folder / "log" / "munged.out")
            wait_for(munge / "socket", timeout=START_TIMEOUT)
            daemons = (["slurmctld", "-D", "-i"], ["slurmd", "-D", "-N", NODE])
            for command in daemons:
                _daemon(stack, command, cluster.env, folder / "log" / f"{command[0]}.out")
            cluster.wait_until_idle()
            try:
                yield cluster
            finally:
                cluster.cancel_all_jobs()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
