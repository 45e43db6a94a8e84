"""A real one-node Slurm cluster for the tests: munged, slurmctld and slurmd started from a temp dir.

Nothing is installed here (scripts/test.sh installs slurm-wlm and munge as root). Everything the
daemons write (key, sockets, state, spool, logs, job completion log) lives in the temp dir and the
ports are free ones, so two test sessions on one box get two independent clusters. No slurmdbd:
`sacct -c` reads the job completion log (jobcomp/filetxt) instead of an accounting database.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")
CONF = """\
ClusterName=grpotest
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge.sock
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
KillWait=10
MinJobAge=600
SlurmdTimeout=30
InactiveLimit=0
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""


def missing() -> str | None:
    """Why a cluster cannot be started here (a one-line reason), or None."""
    absent = [d for d in DAEMONS if not shutil.which(d) and not Path(f"/usr/sbin/{d}").exists()]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing): scripts/test.sh installs slurm-wlm munge as root"
    if os.geteuid() != 0:
        return "the test Slurm cluster runs its daemons as root (SlurmUser=root); these tests run as a user"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _daemon(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class SlurmCluster:
    """One node named after this host with its CPUs, partition `debug`. `env` points the Slurm
    commands (and submitit, which calls them) at this cluster's slurm.conf."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.host = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []

    def start(self, timeout: float = 60) -> None:
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(CONF.format(host=self.host, root=self.root, cpus=self.cpus,
                                         ctld_port=_free_port(), slurmd_port=_free_port()))
        self._start_munge()
        ctld = [_daemon("slurmctld"), "-D", "-i", "-f", str(self.conf)]
        self.procs.append(subprocess.Popen(ctld, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        slurmd = [_daemon("slurmd"), "-D", "-N", self.host, "-f", str(self.conf)]
        self.procs.append(subprocess.Popen(slurmd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        self._wait_idle(timeout)

    def _start_munge(self) -> None:
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        cmd = [_daemon("munged"), "--foreground", "--force", f"--socket={self.root}/munge.sock",
               f"--key-file={key}", f"--pid-file={self.root}/munged.pid", f"--log-file={self.root}/munged.log",
               f"--seed-file={self.root}/munged.seed"]
        self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        deadline = time.time() + 10
        while not (self.root / "munge.sock").exists():
            if self.procs[0].poll() is not None or time.time() > deadline:
                raise RuntimeError(f"munged did not start: {self.log('munged')}")
            time.sleep(0.1)

    def _wait_idle(self, timeout: float) -> None:
        deadline = time.time() + timeout
        state = ""
        while time.time() < deadline:
            for proc, name in zip(self.procs, ("munged", "slurmctld", "slurmd")):
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with code {proc.returncode}: {self.log(name)}")
            state = self.sinfo()
            if state == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the node is not idle after {timeout:.0f}s (sinfo: {state!r}): {self.log('slurmctld')}")

    def sinfo(self) -> str:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
        return out.stdout.strip()

    def run(self, *cmd: str) -> str:
        """A Slurm command against this cluster; its stdout (raises with stderr when it fails)."""
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=True).stdout

    def completed(self, timeout: float = 60) -> dict[str, dict[str, str]]:
        """The ended jobs by id (ARRAY_TASK for array tasks), once the queue is empty: the job
        completion log that `sacct -c` reads, parsed whole, since sacct -c prints an array task by
        its raw id and no submit time. A job's result can exist before Slurm has closed the job."""
        deadline = time.time() + timeout
        while self.run("squeue", "-h", "-o", "%i").strip() and time.time() < deadline:
            time.sleep(0.2)
        try:
            lines = (self.root / "jobcomp.log").read_text().splitlines()
        except OSError:
            return {}
        jobs = {}
        for line in lines:
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            array = fields.get("ArrayJobId")
            jobs[f"{array}_{fields['ArrayTaskId']}" if array else fields["JobId"]] = fields
        return jobs

    def log(self, name: str, lines: int = 8) -> str:
        try:
            return " | ".join((self.root / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def drain(self, timeout: float = 30) -> None:
        """Wait for the queue to empty, then cancel what is left: a job whose result the driver
        already read can still be running its step, and stopping slurmd under it leaves the job's
        processes behind."""
        deadline = time.time() + timeout
        try:
            while (jobs := self.run("squeue", "-h", "-o", "%i").split()) and time.time() < deadline:
                time.sleep(0.2)
            if jobs:  # not checked: a job that ends between squeue and scancel is not an error here
                subprocess.run(["scancel", *jobs], env=self.env, capture_output=True)
            while self.run("squeue", "-h", "-o", "%i").strip() and time.time() < deadline + 15:
                time.sleep(0.2)
        except subprocess.CalledProcessError:
            pass  # the controller is already gone: nothing to drain

    def stop(self) -> None:
        if self.procs and all(proc.poll() is None for proc in self.procs):
            self.drain()
        for proc in reversed(self.procs):  # slurmd, then slurmctld, then munged
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()
