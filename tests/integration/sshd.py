"""A private OpenSSH server on loopback for the multi-host tests.

Addresses in 127.0.0.0/8 stand for different hosts: the server listens on
127.0.0.2, 127.0.0.3, ... on one free high port, with a host key and a user
key generated in a temp dir, so horovodd reaches every "host" over SSH while
the whole job runs on this machine. It runs as the current user (root: sshd
needs it), with no PAM and no password logins.

Run as a script it serves until its stdin closes, printing one JSON line with
what a client needs (for debugging by hand):
    python3 tests/integration/sshd.py /tmp/sshd-dir
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")
START_DEADLINE = 60


def ensure_sshd():
    """Installs openssh-server when sshd is missing; raises if that fails."""
    if SSHD.exists():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(f"{SSHD} is missing and cannot be installed here (needs root and apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", "openssh-server"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True)
        result = subprocess.run(install, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"cannot install openssh-server:\n{result.stderr[-2000:]}")


def free_port(addresses):
    """A port that is free on every address (binding one tells little about the others)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = probe.getsockname()[1]
        if port < 10000:
            continue
        try:
            for address in addresses:
                with socket.socket() as s:
                    s.bind((address, port))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no free port on all of {addresses}")


def keygen(path, comment):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)


def _children():
    """{ppid: [pid...]} of every process on this machine."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid):
    """Every process below pid, by walking parent links."""
    children = _children()
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Sshd:
    """One sshd listening on `addresses`; start() it, stop() it (it and
    everything it started is killed by PID)."""

    def __init__(self, directory, addresses=("127.0.0.2", "127.0.0.3"), extra_config=(),
                 like=None, netns_prefix=()):
        """like: another Sshd whose port and user key this one takes, so one
        set of horovodrun SSH flags reaches both (on different addresses).
        netns_prefix: the argv prefix that runs sshd in a network namespace
        (netns_hosts.TwoHosts.prefix); its sessions and their workers run
        there too."""
        self.dir = Path(directory)
        self.netns_prefix = list(netns_prefix)
        self.addresses = list(addresses)
        self.extra_config = list(extra_config)  # sshd_config lines
        self.like = like
        self.port = None
        self.proc = None
        self.identity = like.identity if like else self.dir / "id_ed25519"
        self.host_key = self.dir / "host_ed25519"
        self.log = self.dir / "sshd.log"

    def start(self):
        ensure_sshd()
        self.dir.mkdir(parents=True, exist_ok=True)
        keygen(self.host_key, "horovodd-test-host")
        if not self.like:
            keygen(self.identity, "horovodd-test-user")
        shutil.copy(self.identity.with_suffix(".pub"), self.dir / "authorized_keys")
        self.port = self.like.port if self.like else free_port(self.addresses)
        config = self.dir / "sshd_config"
        config.write_text("\n".join([
            f"Port {self.port}",
            *[f"ListenAddress {a}" for a in self.addresses],
            f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
            f"PidFile {self.dir / 'sshd.pid'}",
            "StrictModes no",
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "MaxStartups 100",
            "MaxSessions 50",
            # bash reads ~/.bashrc for sshd's commands only as a top-level shell;
            # root's on the test machines takes seconds (pyenv init).
            "SetEnv SHLVL=1",
            "LogLevel INFO",
            *self.extra_config,
            "",
        ]))
        # sshd refuses to start without its privilege separation directory.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        with open(self.log, "w") as log:
            # `ip netns exec` execs sshd: proc.pid is sshd's own.
            self.proc = subprocess.Popen([*self.netns_prefix, str(SSHD), "-D", "-e", "-f",
                                          str(config)],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True)
        deadline = time.monotonic() + START_DEADLINE
        for address in self.addresses:
            while not self._accepts(address):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"sshd did not start on {address}:{self.port}:\n"
                                       + self.log.read_text()[-3000:])
                time.sleep(0.05)
        return self

    def _accepts(self, address):
        if self.netns_prefix:
            # Not reachable from this namespace: sshd says when it listens.
            return f"Server listening on {address} port {self.port}" in self.log.read_text()
        try:
            with socket.create_connection((address, self.port), timeout=1):
                return True
        except OSError:
            return False

    def host_key_line(self, address):
        """The known_hosts line for address, as OpenSSH writes it for a non-22 port."""
        key_type, key = self.host_key.with_suffix(".pub").read_text().split()[:2]
        return f"[{address}]:{self.port} {key_type} {key}"

    def client_args(self, known_hosts, checking=None):
        """horovodrun flags that reach this server."""
        args = ["--ssh-port", self.port, "--ssh-identity-file", self.identity,
                "--ssh-known-hosts", known_hosts]
        if checking:
            args += ["--ssh-host-key-checking", checking]
        return args

    def sessions(self):
        """Pids of everything sshd started: its sessions and the commands they run."""
        return descendants(self.proc.pid) if self.proc else []

    def kill_sessions(self):
        """Kills every session and what it runs; sshd itself keeps serving."""
        if self.proc is not None:
            self._kill_tree(self.proc.pid, include_root=False)

    def stop(self):
        """Kills sshd and everything below it (sessions, the workers they run)."""
        if self.proc is None:
            return
        self._kill_tree(self.proc.pid, include_root=True)
        self.proc.wait(30)
        self.proc = None

    @staticmethod
    def _kill_tree(root, include_root):
        # Freeze the tree first, so nothing forks away while it is collected.
        frozen = set()
        while True:
            tree = descendants(root) + ([root] if include_root else [])
            fresh = [pid for pid in tree if pid not in frozen]
            if not fresh:
                break
            _signal_all(fresh, signal.SIGSTOP)
            frozen.update(fresh)
        _signal_all(frozen, signal.SIGKILL)


if __name__ == "__main__":
    server = Sshd(sys.argv[1]).start()
    print(json.dumps({"port": server.port, "identity": str(server.identity),
                      "addresses": server.addresses}), flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()
