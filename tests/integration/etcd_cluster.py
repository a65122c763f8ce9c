"""A real etcd cluster on loopback for the tests: `members` etcd processes
(Debian's etcd-server) on free ports, their data under a directory of the
test's; each member is killed by its PID (SIGKILL), on kill() or cleanup()."""

import os
import shutil
import signal
import subprocess
import time
import urllib.request

from harness import EVENT_DEADLINE, free_port


class EtcdCluster:
    def __init__(self, root, members=3, client_addresses=("127.0.0.1",)):
        """client_addresses: where each member serves clients (on its client
        port), 127.0.0.1 first: the members advertise that one."""
        self.client_addresses = list(client_addresses)
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.names = [f"m{i}" for i in range(members)]
        self.procs = [None] * members
        # A free port can be taken by another test's process before etcd binds it: the
        # cluster is then brought up again on new ports (a few times at most).
        for attempt in range(3):
            self.client_ports = [free_port() for _ in self.names]
            self.peer_ports = [free_port() for _ in self.names]
            self.token = f"hvdd-test-{os.getpid()}-{time.monotonic_ns()}"
            for i in range(members):
                self.start(i)
            try:
                for i in range(members):
                    self.wait_healthy(i)
                return
            except AssertionError:
                if attempt == 2 or not self.lost_a_port():
                    self.cleanup()
                    raise
                self.cleanup()
                for name in self.names:
                    shutil.rmtree(self.root / name, ignore_errors=True)
                    log = self.root / f"{name}.log"
                    if log.exists():
                        log.rename(self.root / f"{name}.log.{attempt + 1}")

    def lost_a_port(self):
        """Whether a member exited because its port was taken meanwhile."""
        for i, name in enumerate(self.names):
            if self.procs[i] is None or self.procs[i].poll() is None:
                continue
            log = self.root / f"{name}.log"
            if log.exists() and b"address already in use" in log.read_bytes():
                return True
        return False

    @property
    def url(self):
        """etcd://127.0.0.1:p1,... as horovodd --store takes it."""
        return self.url_at("127.0.0.1")

    def url_at(self, address):
        """The store URL of the members at one of client_addresses."""
        return "etcd://" + ",".join(f"{address}:{p}" for p in self.client_ports)

    # Raft timings: etcd's defaults halved. Tighter ones make a loaded machine (two cores, a
    # build beside) elect etcd leaders again and again, and short leases expire through them.
    def start(self, i):
        name = self.names[i]
        client = f"http://127.0.0.1:{self.client_ports[i]}"
        listen = ",".join(f"http://{a}:{self.client_ports[i]}" for a in self.client_addresses)
        peer = f"http://127.0.0.1:{self.peer_ports[i]}"
        cluster = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer_ports))
        log = open(self.root / f"{name}.log", "ab")
        self.procs[i] = subprocess.Popen(
            ["etcd", "--name", name, "--data-dir", str(self.root / name),
             "--listen-client-urls", listen, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", cluster, "--initial-cluster-state", "new",
             "--initial-cluster-token", self.token,
             "--heartbeat-interval", "100", "--election-timeout", "1000"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()

    def wait_healthy(self, i, timeout=EVENT_DEADLINE):
        """Until member i answers /health with a quorum behind it."""
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.client_ports[i]}/health"
        while time.monotonic() < deadline:
            if self.procs[i].poll() is not None:
                raise AssertionError(f"etcd {self.names[i]} exited; see {self.root}")
            try:
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if b'"true"' in answer.read():
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"etcd {self.names[i]} not healthy within {timeout} s; see {self.root}")

    def kill(self, i):
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)

    def restart(self, i):
        """Starts member i again, on its ports and data, if it is not running."""
        if self.procs[i] is None or self.procs[i].poll() is not None:
            self.start(i)

    def cleanup(self):
        for i in range(len(self.procs)):
            self.kill(i)
