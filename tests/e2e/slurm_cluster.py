"""A throw-away one-machine Slurm cluster for the fleet tests: munged, slurmctld and slurmd from
Debian's slurm-wlm and munge, with a generated slurm.conf in a temporary folder, two partitions
("fast" and "slow") on this node. Root only (slurmd runs jobs as their users)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

NEEDED = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "scancel", "munged")


def missing() -> list[str]:
    return [p for p in NEEDED if shutil.which(p) is None and not os.path.exists(f"/usr/sbin/{p}")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, root: Path):
        self.root = root
        self.host = socket.gethostname()
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []

    def _munge(self) -> None:
        d = self.root / "munge"
        d.mkdir(mode=0o700)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = d / "munge.socket"
        self.procs.append(subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={self.munge_socket}",
             f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}", f"--seed-file={d / 'seed'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for _ in range(100):
            if self.munge_socket.exists():
                return
            time.sleep(0.05)
        raise RuntimeError("munged did not start: " + (d / "munged.log").read_text(errors="replace")[-500:])

    def start(self) -> "Cluster":
        self._munge()
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir()
        cpus = os.cpu_count() or 1
        mem_mb = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal"))) // 1024
        self.conf.write_text(f"""\
ClusterName=memsleuth-test
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}
SlurmctldPidFile={self.root / 'slurmctld.pid'}
SlurmdPidFile={self.root / 'slurmd.pid'}
SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}
SlurmdLogFile={self.root / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
MinJobAge=600
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={max(mem_mb - 512, 256)} State=UNKNOWN
PartitionName=fast Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
PartitionName=slow Nodes={self.host} MaxTime=INFINITE State=UP
""")
        for daemon in ("slurmctld", "slurmd"):
            self.procs.append(subprocess.Popen([daemon, "-D", "-f", str(self.conf)], env=self.env,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%P %t"], env=self.env, capture_output=True, text=True)
            states = out.stdout.split()
            if out.returncode == 0 and "idle" in states:
                return self
            time.sleep(0.5)
        logs = "".join((self.root / "log" / f).read_text(errors="replace")[-800:]
                       for f in ("slurmctld.log", "slurmd.log") if (self.root / "log" / f).exists())
        self.stop()
        raise RuntimeError(f"the Slurm node did not become idle in 60 s: {logs}")

    def stop(self) -> None:
        subprocess.run(["scancel", "--user=root"], env=self.env, capture_output=True)
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
