"""A real Slurm cluster on this machine for tests: Debian's slurm-wlm and munge, started inside a private network
namespace (munged, slurmctld, two slurmd as node1/node2 on the namespace's loopback), stopped by PID.

Clients reach it the way a login node would: `sbatch`, `squeue`, ... on PATH are two-line wrappers that enter the
namespace (nsenter --net, never `ip netns exec`, which hides the cgroup mounts from slurmd) and run the real tool."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "sacct", "srun")
START_TIMEOUT_S = 180  # munged, slurmctld and two slurmd registering on a busy 2-core machine


def available() -> str | None:
    """None when a cluster can be started here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespace, slurmd)"
    missing = [t for t in ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "nsenter", "ip")
               if not shutil.which(t)]
    if missing:
        return f"not installed: {', '.join(missing)} (scripts/bootstrap.sh installs slurm-wlm and munge)"
    return None


def _conf(state: Path, nodes: int) -> str:
    host = socket.gethostname()
    lines = [
        "ClusterName=smdisttest", f"SlurmctldHost={host}(127.0.0.1)", "SlurmctldPort=17817", "SlurmdPort=17818",
        "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={state}/munge/munge.sock", f"StateSaveLocation={state}/state",
        f"SlurmdSpoolDir={state}/spool/%n", f"SlurmctldPidFile={state}/run/slurmctld.pid",
        f"SlurmdPidFile={state}/run/slurmd-%n.pid", f"SlurmctldLogFile={state}/log/slurmctld.log",
        f"SlurmdLogFile={state}/log/slurmd-%n.log", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "MpiDefault=none",
        "SwitchType=switch/none", "ReturnToService=2", "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0",
        "MinJobAge=600", "KillWait=5", "Waittime=0", "SchedulerType=sched/backfill",
    ]
    for i in range(1, nodes + 1):
        lines.append(f"NodeName=node{i} NodeHostname={host} NodeAddr=127.0.0.1 Port={17818 + i} CPUs=1 "
                     "RealMemory=2000 State=UNKNOWN")
    lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    lines.append("PartitionName=short Nodes=ALL MaxTime=1 State=UP")
    return "\n".join(lines) + "\n"


@dataclass
class SlurmCluster:
    state: Path
    nodes: int = 2
    netns: str = field(default_factory=lambda: f"smdist-slurm-{os.getpid()}")
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.state / "slurm.conf"

    @property
    def bin_dir(self) -> Path:
        return self.state / "bin"

    def env(self) -> dict[str, str]:
        """What a client needs: the wrappers first on PATH and SLURM_CONF."""
        return {"PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "SLURM_CONF": str(self.conf)}

    def _in_ns(self, *argv: str) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.netns}", *argv]

    def start(self) -> SlurmCluster:
        for d in ("state", "log", "run", "munge", "bin", *(f"spool/node{i}" for i in range(1, self.nodes + 1))):
            (self.state / d).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(_conf(self.state, self.nodes))
        for tool in CLIENTS:
            real = shutil.which(tool)
            if real:
                wrapper = self.bin_dir / tool
                wrapper.write_text(f"#!/bin/sh\nexec nsenter --net=/run/netns/{self.netns} {real} \"$@\"\n")
                wrapper.chmod(0o755)
        subprocess.run(["ip", "netns", "add", self.netns], check=True, timeout=30)
        try:
            # Slurm resolves addresses with AI_ADDRCONFIG, which finds nothing while a namespace has only
            # loopback: a veth pair inside the namespace gives it one non-loopback address (reachable nowhere else).
            subprocess.run(self._in_ns("sh", "-ec", "ip link set lo up; ip link add smd0 type veth peer name smd1; "
                                       "ip addr add 10.213.250.1/24 dev smd0; "
                                       "ip link set smd0 up; ip link set smd1 up"),
                           check=True, timeout=30)
            munge = self.state / "munge"
            subprocess.run(["mungekey", "--create", f"--keyfile={munge}/munge.key"], check=True, timeout=30,
                           capture_output=True)
            os.chmod(munge / "munge.key", 0o400)
            env = {**os.environ, "SLURM_CONF": str(self.conf)}
            self._spawn(["munged", "-F", "--force", "-S", f"{munge}/munge.sock", f"--key-file={munge}/munge.key",
                         f"--log-file={munge}/munged.log", f"--pid-file={munge}/munged.pid",
                         f"--seed-file={munge}/munged.seed"], env)
            self._wait_for(lambda: (munge / "munge.sock").exists(), "munged's socket")
            self._spawn(self._in_ns("slurmctld", "-D", "-i"), env)
            for i in range(1, self.nodes + 1):
                self._spawn(self._in_ns("slurmd", "-D", "-N", f"node{i}"), env)
            self._wait_for(self._idle, f"{self.nodes} idle nodes")
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, argv: list[str], env: dict[str, str]) -> None:
        name = Path(argv[2] if argv[0] == "nsenter" else argv[0]).name
        with open(self.state / "log" / f"{name}-{len(self.procs)}.out", "wb") as log:  # the daemon keeps its own copy
            self.procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True))

    def _idle(self) -> bool:
        done = subprocess.run([str(self.bin_dir / "sinfo"), "-h", "-o", "%T %D"], capture_output=True, text=True,
                              timeout=30, env={**os.environ, **self.env()})
        return done.stdout.strip() == f"idle {self.nodes}"

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}"
                                 for p in sorted((self.state / "log").glob("*")) if p.is_file())
                raise RuntimeError(f"the test Slurm cluster did not come up ({what}; exited: {dead})\n{logs}")
            time.sleep(0.25)

    def stop(self) -> None:
        """SIGTERM every daemon we started (by PID), SIGKILL after 10 s, then remove the namespace."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.procs.clear()
        subprocess.run(["ip", "netns", "del", self.netns], timeout=30, capture_output=True)
