"""Two horovodd of one HA setup (issue 36): a real three-member etcd on
loopback (etcd_cluster.py), each daemon on its own state dir and address as
if on its own machine, sharing the store, the admin token (auth.admin_token_file)
and so the jobs (and, when given, one `tls` section). Used by test_ha_takeover.py,
test_ha_tls.py, test_submit_idempotency.py and bench/ha_takeover.py."""

import os
import secrets
import signal

from etcd_cluster import EtcdCluster
from harness import HOROVODD_SHIM, Daemon, free_port, kill_shims


class HaPair:
    """etcd and the daemons "a" and "b" (started by start(name)); cleanup()
    ends every daemon and its shims, then the etcd members, by PID."""

    def __init__(self, root, lease_ttl=3, env=None, hosts=None, placement=None, tls=None):
        """hosts, placement: netns_hosts.Hosts with uplinks, and {name: host}:
        each daemon runs on its host, listens on its address and reaches etcd
        (in the root namespace) through its uplink. Without them every
        daemon runs here, on 127.0.0.1."""
        self.root = root
        self.hosts = hosts
        self.placement = placement or {}
        gateways = [hosts.gateway(i) for i in range(hosts.count)] if hosts else []
        self.etcd = EtcdCluster(root / "etcd", members=3,
                                client_addresses=["127.0.0.1", *gateways])
        # One admin token for every daemon of the setup, as an operator copies it to each host.
        self.token = root / "admin.token"
        fd = os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        self.lease_ttl = lease_ttl
        self.env = env
        # The `tls` section of every daemon's config (key: path), as on each host of a setup.
        self.tls = tls or {}
        self.listen = {name: f"{self._address(name)}:{free_port()}" for name in ("a", "b")}
        self.started = []

    def _address(self, name):
        return self.hosts.addresses[self.placement[name]] if name in self.placement else "127.0.0.1"

    def _prefix(self, name):
        return self.hosts.prefix(self.placement[name]) if name in self.placement else ()

    def config(self, name):
        path = self.root / f"horovodd-{name}.yaml"
        store = (self.etcd.url_at(self.hosts.gateway(self.placement[name]))
                 if name in self.placement else self.etcd.url)
        path.write_text(f"store: {store}\n"
                        f"etcd:\n  prefix: /hvdd-test/\n  lease_ttl: {self.lease_ttl}s\n"
                        f"auth:\n  admin_token_file: {self.token}\n"
                        f"shim:\n  binary: {HOROVODD_SHIM.resolve()}\n" +
                        ("tls:\n" + "".join(f"  {k}: {v}\n" for k, v in self.tls.items())
                         if self.tls else ""))
        return path

    def state_dir(self, name):
        return self.root / f"state-{name}"

    def start(self, name):
        daemon = Daemon(self.state_dir(name), self.listen[name], cwd=self.root, env=self.env,
                        config=self.config(name), prefix=self._prefix(name))
        daemon.token_file = self.token
        daemon.name = name
        self.started.append(daemon)
        return daemon

    def kill_host(self, daemon):
        """Everything of the daemon's "machine": the daemon and its local shims, by PID."""
        if daemon.proc.poll() is None:
            os.kill(daemon.proc.pid, signal.SIGKILL)
            daemon.proc.wait(30)
        kill_shims(self.state_dir(daemon.name))

    def cleanup(self):
        for i, daemon in enumerate(self.started):
            # Kept for a failure's post-mortem.
            (self.root / f"daemon-{i}-{daemon.name}.log").write_text(daemon.output())
        for daemon in self.started:
            if daemon.proc.poll() is None:
                try:
                    os.kill(daemon.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            daemon.cleanup()
        for name in ("a", "b"):
            kill_shims(self.state_dir(name))
        self.etcd.cleanup()
