"""Two "hosts" that are really apart on one machine: each a network namespace
of its own, joined by one veth pair that can be rate-limited like a real
link between hosts.

The 127.0.0.2/3 of the other multi-host tests share one loopback, so a byte
from host A to host B costs what a byte within a host costs, and no link can
be shaped or counted between them (an unbound connecting socket leaves from
127.0.0.1 whichever host it belongs to). Here host A owns 127.0.0.2 and host
B 127.0.0.3, each on the loopback of its own namespace: traffic within a host
stays on that loopback, traffic between them crosses the veth pair, where
its bytes are counted (`link_bytes`) and, with `rate`, a token bucket holds
them to a link's speed. The addresses stay in 127.0.0.0/8, so nothing here
can reach beyond this machine: each namespace routes the other host's
address through the veth (`route_localnet`), and the root namespace is not
touched.

Needs root (`ip netns`, `tc`). A namespace holds its own copy of nothing
else: /dev/shm, /proc and the file system are the machine's, so workers of
one host share memory as they would on a real one. Run a command on a host
with `prefix(host)`; an sshd per host (sshd.Sshd's `netns`) makes the hosts
reachable by horovodrun's SSH launcher run on host A.
"""

import json
import os
import subprocess

ADDRESSES = ("127.0.0.2", "127.0.0.3")


def available():
    """Whether this process may make network namespaces (root, with ip and tc)."""
    return os.geteuid() == 0 and all(os.path.exists(p) for p in ("/usr/sbin/ip", "/usr/sbin/tc"))


def _run(argv):
    """Runs argv; its stdout, or an error naming the command and what it said."""
    result = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def _ip(*args, namespace=None):
    return _run(["ip", *(["-n", namespace] if namespace else []), *args])


class TwoHosts:
    """Hosts ADDRESSES[0] and ADDRESSES[1], one network namespace each.

    rate: None for an unshaped veth, or a tc rate ("1gbit", "500mbit") that
    holds each direction of the link to it. Use as a context manager, or
    call close(): it deletes both namespaces (and with them the veth pair).
    Stop whatever runs inside first: a namespace lives on while a process
    is in it, though it can no longer be named.
    """

    def __init__(self, rate=None, tag=None):
        tag = tag or str(os.getpid())
        self.addresses = ADDRESSES
        self.rate = rate
        self.namespaces = (f"hvdd-{tag}-a", f"hvdd-{tag}-b")
        # Interface names are at most 15 characters.
        self.links = (f"hv{tag[-9:]}a", f"hv{tag[-9:]}b")
        self._made = []

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def open(self):
        try:
            for namespace in self.namespaces:
                _ip("netns", "add", namespace)
                self._made.append(namespace)
            _ip("link", "add", self.links[0], "netns", self.namespaces[0], "type", "veth",
                "peer", "name", self.links[1], "netns", self.namespaces[1])
            for me in (0, 1):
                self._configure(me)
        except Exception:
            self.close()
            raise
        return self

    def _configure(self, me):
        namespace, link = self.namespaces[me], self.links[me]
        address, peer = self.addresses[me], self.addresses[1 - me]
        sysctl = [*self.prefix(me), "sysctl", "-qw"]
        # A 127/8 address is a martian on any interface but lo unless
        # route_localnet says otherwise (in this namespace only).
        _run(sysctl + ["net.ipv4.conf.all.route_localnet=1",
                       "net.ipv4.conf.default.route_localnet=1"])
        _ip("link", "set", "lo", "up", namespace=namespace)
        # lo comes up owning all of 127.0.0.0/8, the peer's address included:
        # keep 127.0.0.1 (the daemon's tunnel ends there) and this host's own.
        _ip("addr", "del", "127.0.0.1/8", "dev", "lo", namespace=namespace)
        _ip("addr", "add", "127.0.0.1/32", "dev", "lo", namespace=namespace)
        _ip("addr", "add", f"{address}/32", "dev", "lo", namespace=namespace)
        _ip("link", "set", link, "up", namespace=namespace)
        _run(sysctl + [f"net.ipv4.conf.{link}.route_localnet=1"])
        # `src`: a connection to the other host leaves from this host's
        # address, never from 127.0.0.1 (which each host has for itself).
        _ip("route", "add", f"{peer}/32", "dev", link, "src", address, namespace=namespace)
        if self.rate:
            # A token bucket per direction; the burst holds one 64 KiB GSO
            # segment many times over, the queue 50 ms at the rate.
            _run([*self.prefix(me), "tc", "qdisc", "add", "dev", link, "root", "tbf",
                  "rate", self.rate, "burst", "1mb", "latency", "50ms"])

    def close(self):
        for namespace in reversed(self._made):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        self._made = []

    def prefix(self, host):
        """The argv prefix that runs a command on host 0 or 1."""
        return ["ip", "netns", "exec", self.namespaces[host]]

    def link_bytes(self):
        """(bytes host A sent to host B, bytes B sent to A) over the link so far:
        every packet's length at the veth, headers included."""
        sent = []
        for me in (0, 1):
            stats = json.loads(_ip("-j", "-s", "link", "show", "dev", self.links[me],
                                   namespace=self.namespaces[me]))
            sent.append(int(stats[0]["stats64"]["tx"]["bytes"]))
        return tuple(sent)
