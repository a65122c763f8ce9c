"""A private Slurm cluster on loopback for the Slurm tests.

One munged with its own key, socket and state, one slurmctld and two slurmd
(`slurmd -N node1`, `slurmd -N node2`: Debian's build runs several slurmd on
one host), every node at NodeAddr=127.0.0.1 on a port of its own. All config,
state, spool and log files live in one temp dir; SLURM_CONF in `env()` points
the clients (srun, salloc, scontrol...) at it. It runs as the current user
(root: slurmd needs it). Cgroups are not assumed: processes are tracked with
proctrack/linuxproc and tasks are bound with task/affinity only, which is what
a container allows.

Run as a script it serves until its stdin closes, printing the SLURM_CONF to
export (for debugging by hand):
    python3 tests/integration/slurm_cluster.py /tmp/slurm-dir
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from sshd import free_port

NODES = ("node1", "node2")
CPUS_PER_NODE = 4
START_DEADLINE = 90
BINARIES = ("munged", "slurmctld", "slurmd", "srun", "salloc", "scontrol", "sinfo", "squeue")


def ensure_slurm():
    """Installs slurm-wlm and munge when missing (as scripts/install_deps.sh does); raises if
    that cannot be done here."""
    if all(shutil.which(b) or Path("/usr/sbin", b).exists() for b in BINARIES):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError("slurm-wlm/munge are missing and cannot be installed here")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True)
        result = subprocess.run(install, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"cannot install slurm-wlm: {result.stderr[-2000:]}")


def _sbin(name):
    return shutil.which(name) or str(Path("/usr/sbin", name))


class SlurmCluster:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs = []  # (name, Popen), stopped in reverse order
        self.munge_socket = self.dir / "munge" / "munge.socket.2"
        self.conf = self.dir / "slurm.conf"

    def env(self, **extra):
        env = dict(os.environ, SLURM_CONF=str(self.conf))
        for name in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del env[name]  # never inherit another allocation's variables
        env.update(extra)
        return env

    def start(self):
        ensure_slurm()
        try:
            self._start_munge()
            self._write_config()
            self._start("slurmctld", [_sbin("slurmctld"), "-D", "-f", str(self.conf)])
            for node in NODES:
                self._start(f"slurmd-{node}",
                            [_sbin("slurmd"), "-D", "-N", node, "-f", str(self.conf)])
            self.wait_nodes_idle(NODES, START_DEADLINE)
        except BaseException:
            self.stop()
            raise

    def _start(self, name, argv):
        log = open(self.dir / f"{name}.out", "wb")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=self.env(),
                                start_new_session=True)
        log.close()
        self.procs.append((name, proc))
        return proc

    def _start_munge(self):
        munge_dir = self.dir / "munge"
        munge_dir.mkdir(mode=0o700, exist_ok=True)
        key = munge_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._start("munged", ["munged", "-F", "--force", f"--socket={self.munge_socket}",
                               f"--key-file={key}", f"--pid-file={munge_dir / 'munged.pid'}",
                               f"--log-file={munge_dir / 'munged.log'}",
                               f"--seed-file={munge_dir / 'munged.seed'}"])
        deadline = time.monotonic() + START_DEADLINE
        while not self.munge_socket.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError("munged did not create its socket")
            time.sleep(0.1)

    def _write_config(self):
        for sub in ("state", "spool", "log"):
            (self.dir / sub).mkdir(exist_ok=True)
        for node in NODES:
            (self.dir / "spool" / node).mkdir(exist_ok=True)
        ports = set()
        while len(ports) < 1 + len(NODES):
            ports.add(free_port(["127.0.0.1"]))
        ctld_port, *node_ports = sorted(ports)
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        lines = [
            "ClusterName=hvddtest",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmUser={user}",
            f"SlurmdUser={user}",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.dir / 'state'}",
            f"SlurmdSpoolDir={self.dir / 'spool'}/%n",
            f"SlurmctldPidFile={self.dir / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.dir / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={self.dir / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.dir / 'log' / 'slurmd-%n.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # No cgroups in a container: track processes by parentage; CPU binding
            # through sched_setaffinity only (srun --cpu-bind=none needs a task plugin
            # that binds, or it warns on every step).
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/affinity",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "MpiDefault=none",
            # Both nodes are this machine: take their CPUs from here, not from the hardware.
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=30",
            "Waittime=0",
        ]
        for node, port in zip(NODES, node_ports):
            lines.append(f"NodeName={node} NodeAddr=127.0.0.1 NodeHostname=localhost "
                         f"Port={port} CPUs={CPUS_PER_NODE} State=UNKNOWN")
        lines.append(f"PartitionName=debug Nodes={','.join(NODES)} Default=YES "
                     "MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(line for line in lines if line) + "\n")
        # slurmd loads a cgroup plugin even with nothing to confine; v1 is what this host mounts.
        (self.dir / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")

    def _check_alive(self):
        for name, proc in self.procs:
            if proc.poll() is not None:
                out = (self.dir / f"{name}.out").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{out}")

    def node_states(self):
        """{node: state} as sinfo tells it ("idle", "drain", "down*", ...)."""
        result = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True,
                                text=True, env=self.env(), timeout=30)
        states = {}
        for line in result.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def wait_nodes_idle(self, nodes, timeout):
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            states = self.node_states()
            if all(states.get(n) == "idle" for n in nodes):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes not idle after {timeout}s: {states}")
            time.sleep(0.5)

    def scontrol(self, *args):
        return subprocess.run(["scontrol", *args], capture_output=True, text=True,
                              env=self.env(), timeout=30, check=True).stdout

    def steps(self, job_id):
        """The job's steps as squeue lists them: ["12.0 hvdd-...", ...]."""
        out = subprocess.run(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i %j"],
                             capture_output=True, text=True, env=self.env(), timeout=30)
        return [line.strip() for line in out.stdout.splitlines()
                if line.strip() and ".extern" not in line and ".batch" not in line]

    def log_tail(self, chars=4000):
        parts = []
        for name in ("slurmctld.log", "slurmd-node1.log", "slurmd-node2.log"):
            path = self.dir / "log" / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def stop(self):
        for name, proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=20)
        self.procs = []


if __name__ == "__main__":
    cluster = SlurmCluster(sys.argv[1])
    cluster.start()
    print(f"export SLURM_CONF={cluster.conf}", flush=True)
    try:
        sys.stdin.read()
    finally:
        cluster.stop()
