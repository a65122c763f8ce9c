"""A real etcd cluster for an integration test: `members` etcd processes
(Debian's etcd-server) on free loopback ports, their data under a directory
of the test's. Members are killed (SIGKILL) and started again by PID, on the
same ports and data; cleanup() ends every one still running."""

import json
import subprocess
import time
import urllib.request

from harness import free_port


class EtcdCluster:
    def __init__(self, root, members=3, timeout=60):
        self.root = root
        self.names = [f"m{i}" for i in range(members)]
        self.client_ports = [free_port() for _ in self.names]
        self.peer_ports = [free_port() for _ in self.names]
        self.procs = [None] * members
        self.initial_cluster = ",".join(
            f"{name}=http://127.0.0.1:{port}" for name, port in zip(self.names, self.peer_ports))
        for i in range(members):
            self.start(i)
        for i in range(members):
            self.wait_healthy(i, timeout)

    def endpoints(self):
        return [f"127.0.0.1:{port}" for port in self.client_ports]

    def url(self):
        """etcd://h:p,h:p,h:p, as horovodd's store setting takes it."""
        return "etcd://" + ",".join(self.endpoints())

    def start(self, i):
        client = f"http://127.0.0.1:{self.client_ports[i]}"
        peer = f"http://127.0.0.1:{self.peer_ports[i]}"
        log = open(self.root / f"etcd-{self.names[i]}.log", "a")
        self.procs[i] = subprocess.Popen(
            ["etcd", "--name", self.names[i], "--data-dir", str(self.root / f"etcd-{self.names[i]}"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", self.initial_cluster, "--initial-cluster-state", "new",
             "--initial-cluster-token", f"hvdd-{self.client_ports[0]}",
             # Quick elections: the test waits on them.
             "--heartbeat-interval", "50", "--election-timeout", "500"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()

    def healthy(self, i):
        """Whether member i answers and has a leader (etcd's /health)."""
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.client_ports[i]}/health", timeout=2) as answer:
                return json.loads(answer.read()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def wait_healthy(self, i, timeout=60):
        deadline = time.monotonic() + timeout
        while not self.healthy(i):
            if self.procs[i].poll() is not None:
                raise AssertionError(f"etcd member {self.names[i]} exited "
                                     f"({self.procs[i].returncode}); see {self.root}")
            if time.monotonic() > deadline:
                raise AssertionError(f"etcd member {self.names[i]} not healthy in {timeout} s")
            time.sleep(0.1)

    def kill(self, i):
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)

    def restart(self, i):
        if self.procs[i] is None or self.procs[i].poll() is not None:
            self.start(i)

    def cleanup(self):
        for i in range(len(self.procs)):
            self.kill(i)
