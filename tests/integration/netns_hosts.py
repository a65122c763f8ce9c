"""Hosts that are really apart on one machine: each a network namespace of
its own, every two of them joined by a veth pair that can be rate-limited,
counted or cut like a real link between hosts.

The 127.0.0.2/3 of the other multi-host tests share one loopback, so a byte
from host A to host B costs what a byte within a host costs, and no link can
be shaped, counted or cut between them (an unbound connecting socket leaves
from 127.0.0.1 whichever host it belongs to). Here host i owns 127.0.0.(2+i)
on the loopback of its own namespace: traffic within a host stays on that
loopback, traffic between two hosts crosses their veth pair, where its bytes
are counted (`link_bytes`), with `rate` a token bucket holds them to a
link's speed, and `cut` drops them. The addresses stay in 127.0.0.0/8, so
nothing here can reach beyond this machine: each namespace routes the other
hosts' addresses through their veths (`route_localnet`).

With `uplink`, each host also has a veth pair to the root namespace (a /30
of 198.18.0.0/15, the benchmarking range, picked by the tag): a service run
here (etcd) listening on `gateway(host)` is reachable from that host, and
cutting the uplink alone parts the host from it and from nothing else.
Without it the root namespace is not touched.

Needs root (`ip netns`, `tc`). A namespace holds its own copy of nothing
else: /dev/shm, /proc and the file system are the machine's, so workers of
one host share memory as they would on a real one. Run a command on a host
with `prefix(host)`; an sshd per host (`with_sshd`) makes the hosts
reachable by horovodrun's SSH launcher.

The kernel here has no netem nor prio qdisc: a drop is an htb class whose
leaf (pfifo limit 0) drops every packet sent to it, which is what netem's
loss 100% does on one direction.
"""

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import time

from sshd import Sshd

ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
LETTERS = "abcd"
UPLINKS = ipaddress.ip_network("198.18.0.0/15")


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


class Hosts:
    """`count` hosts, ADDRESSES[0], ADDRESSES[1], ..., one network namespace each.

    rate: None for unshaped veths, or a tc rate ("1gbit", "500mbit") that
    holds each direction of every link between hosts to it.
    uplink: give each host a veth pair to the root namespace too.
    Use as a context manager, or call close(): it deletes the namespaces
    (and with them every veth pair and qdisc). Stop whatever runs inside
    first: a namespace lives on while a process is in it, though it can no
    longer be named.
    """

    _made_here = 0  # Hosts made by this process: each tag its own

    def __init__(self, count=2, rate=None, tag=None, uplink=False):
        assert 2 <= count <= len(ADDRESSES), count
        if tag is None:
            # The kernel dismantles a deleted namespace (and its links) later:
            # the next Hosts of this process must not need its names.
            Hosts._made_here += 1
            tag = f"{os.getpid()}{Hosts._made_here % 100:02d}"
        self.count = count
        self.addresses = ADDRESSES[:count]
        self.rate = rate
        self.uplink = uplink
        self.namespaces = tuple(f"hvdd-{tag}-{LETTERS[i]}" for i in range(count))
        # Interface names are at most 15 characters.
        self._tag = tag[-9:]
        block = list(UPLINKS.subnets(new_prefix=28))[int(tag[-9:]) % (UPLINKS.num_addresses // 16)] \
            if tag[-9:].isdigit() else next(UPLINKS.subnets(new_prefix=28))
        self._uplinks = list(block.subnets(new_prefix=30))
        self._made = []
        self._cut = set()

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def link(self, me, peer):
        """The name of host me's end of its link to host peer ("root": its uplink)."""
        return f"hv{self._tag}{LETTERS[me]}{'u' if peer == 'root' else LETTERS[peer]}"

    def _root_end(self, me):
        return f"hv{self._tag}{LETTERS[me]}r"

    def gateway(self, me):
        """The root namespace's address on host me's uplink."""
        return str(self._uplinks[me][1])

    def open(self):
        try:
            for namespace in self.namespaces:
                _ip("netns", "add", namespace)
                self._made.append(namespace)
            for me in range(self.count):
                self._configure_host(me)
            for me in range(self.count):
                for peer in range(me + 1, self.count):
                    _ip("link", "add", self.link(me, peer), "netns", self.namespaces[me],
                        "type", "veth", "peer", "name", self.link(peer, me), "netns",
                        self.namespaces[peer])
                    self._configure_link(me, peer)
                    self._configure_link(peer, me)
                if self.uplink:
                    self._configure_uplink(me)
        except Exception:
            self.close()
            raise
        return self

    def _configure_host(self, me):
        namespace = self.namespaces[me]
        # A 127/8 address is a martian on any interface but lo unless
        # route_localnet says otherwise (in this namespace only).
        _run([*self.prefix(me), "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1",
              "net.ipv4.conf.default.route_localnet=1"])
        _ip("link", "set", "lo", "up", namespace=namespace)
        # lo comes up owning all of 127.0.0.0/8, the peers' addresses included:
        # keep 127.0.0.1 (the daemon's tunnel ends there) and this host's own.
        _ip("addr", "del", "127.0.0.1/8", "dev", "lo", namespace=namespace)
        _ip("addr", "add", "127.0.0.1/32", "dev", "lo", namespace=namespace)
        _ip("addr", "add", f"{self.addresses[me]}/32", "dev", "lo", namespace=namespace)

    def _configure_link(self, me, peer):
        namespace, link = self.namespaces[me], self.link(me, peer)
        _ip("link", "set", link, "up", namespace=namespace)
        _run([*self.prefix(me), "sysctl", "-qw", f"net.ipv4.conf.{link}.route_localnet=1"])
        # `src`: a connection to the other host leaves from this host's
        # address, never from 127.0.0.1 (which each host has for itself).
        _ip("route", "add", f"{self.addresses[peer]}/32", "dev", link, "src", self.addresses[me],
            namespace=namespace)
        if self.rate:
            # A token bucket per direction; the burst holds one 64 KiB GSO
            # segment many times over, the queue 50 ms at the rate.
            _run([*self.prefix(me), "tc", "qdisc", "add", "dev", link, "root", "tbf",
                  "rate", self.rate, "burst", "1mb", "latency", "50ms"])

    def _configure_uplink(self, me):
        namespace, link, root_end = self.namespaces[me], self.link(me, "root"), self._root_end(me)
        subnet = self._uplinks[me]
        _ip("link", "add", link, "netns", namespace, "type", "veth", "peer", "name", root_end)
        _ip("addr", "add", f"{subnet[1]}/{subnet.prefixlen}", "dev", root_end)
        _ip("link", "set", root_end, "up")
        _ip("addr", "add", f"{subnet[2]}/{subnet.prefixlen}", "dev", link, namespace=namespace)
        _ip("link", "set", link, "up", namespace=namespace)

    def close(self):
        for namespace in reversed(self._made):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        self._made = []

    def sysctl(self, host, setting):
        """Sets a per-namespace sysctl ("net.ipv4.tcp_retries2=5") on host i."""
        _run([*self.prefix(host), "sysctl", "-qw", setting])

    def prefix(self, host):
        """The argv prefix that runs a command on host i."""
        return ["ip", "netns", "exec", self.namespaces[host]]

    def pids(self, host):
        """Every process of host i (whatever runs in its namespace)."""
        listed = subprocess.run(["ip", "netns", "pids", self.namespaces[host]],
                                capture_output=True, text=True).stdout
        return [int(pid) for pid in listed.split()]

    def kill_all(self, host, timeout=30):
        """SIGKILLs every process of host i, by PID, until none is left."""
        deadline = time.monotonic() + timeout
        while pids := self.pids(host):
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                raise AssertionError(f"processes of {self.namespaces[host]} outlive SIGKILL: {pids}")
            time.sleep(0.05)

    def link_bytes(self, me=0, peer=1):
        """(bytes host me sent to host peer, bytes peer sent to me) over their
        link so far: every packet's length at the veth, headers included."""
        sent = []
        for a, b in ((me, peer), (peer, me)):
            stats = json.loads(_ip("-j", "-s", "link", "show", "dev", self.link(a, b),
                                   namespace=self.namespaces[a]))
            sent.append(int(stats[0]["stats64"]["tx"]["bytes"]))
        return tuple(sent)

    # --- dropping what crosses a link

    def _ends(self, me, peer):
        """(argv prefix, device) of each end of host me's link to peer."""
        if peer == "root":
            return [(self.prefix(me), self.link(me, "root")), ([], self._root_end(me))]
        return [(self.prefix(me), self.link(me, peer)), (self.prefix(peer), self.link(peer, me))]

    def drop(self, me, peer, keep_sport=None):
        """From now on what host me sends to peer over their link is dropped
        (TCP only, and none from source port keep_sport, if given)."""
        prefix, link = self._ends(me, peer)[0]
        _drop(prefix, link, keep_sport)

    def cut(self, me, peers=None):
        """Drops everything both ways on host me's links to `peers` (default:
        every other host and its uplink), as a pulled cable does."""
        for peer in self._peers(me, peers):
            for prefix, device in self._ends(me, peer):
                _drop(prefix, device, None)
                self._cut.add((tuple(prefix), device))

    def restore(self, me, peers=None):
        """Undoes drop() and cut() on host me's links to `peers` (default: all)."""
        for peer in self._peers(me, peers):
            for prefix, device in self._ends(me, peer):
                subprocess.run([*prefix, "tc", "qdisc", "del", "dev", device, "root"],
                               capture_output=True)
                self._cut.discard((tuple(prefix), device))

    def restore_all(self):
        """Undoes every cut (a test's `finally`: the uplinks' root ends outlive
        nothing, but a qdisc left on them must not)."""
        for prefix, device in list(self._cut):
            subprocess.run([*prefix, "tc", "qdisc", "del", "dev", device, "root"],
                           capture_output=True)
        self._cut.clear()

    def _peers(self, me, peers):
        if peers is not None:
            return peers
        return [p for p in range(self.count) if p != me] + (["root"] if self.uplink else [])


def _drop(prefix, device, keep_sport):
    """An htb root on device whose class 1:20 drops every packet sent to it:
    everything (keep_sport None) or every TCP packet but keep_sport's."""
    tc = [*prefix, "tc"]
    _run(tc + ["qdisc", "add", "dev", device, "root", "handle", "1:", "htb", "default",
               "20" if keep_sport is None else "10"])
    for classid in ("1:10", "1:20"):
        _run(tc + ["class", "add", "dev", device, "parent", "1:", "classid", classid, "htb",
                   "rate", "10gbit"])
    _run(tc + ["qdisc", "add", "dev", device, "parent", "1:20", "handle", "20:", "pfifo",
               "limit", "0"])
    if keep_sport is not None:
        _run(tc + ["filter", "add", "dev", device, "parent", "1:", "protocol", "ip", "prio", "1",
                   "u32", "match", "ip", "sport", str(keep_sport), "0xffff", "flowid", "1:10"])
        _run(tc + ["filter", "add", "dev", device, "parent", "1:", "protocol", "ip", "prio", "2",
                   "u32", "match", "ip", "protocol", "6", "0xff", "flowid", "1:20"])


class TwoHosts(Hosts):
    """Hosts ADDRESSES[0] and ADDRESSES[1] and the one link between them;
    `links` names its two ends (A's, B's)."""

    def __init__(self, rate=None, tag=None):
        super().__init__(2, rate=rate, tag=tag)
        self.links = (self.link(0, 1), self.link(1, 0))


@contextlib.contextmanager
def with_sshd(hosts, directory, on=None, extra_config=()):
    """An sshd on each host of `on` (default: all), one port and user key for
    all (the first's), so one set of horovodrun SSH flags reaches every one.
    Yields {host: Sshd}; each is stopped (it and all it runs, by PID) at the end."""
    servers = {}
    try:
        for host in (range(hosts.count) if on is None else on):
            first = next(iter(servers.values()), None)
            server = Sshd(directory / LETTERS[host], addresses=[hosts.addresses[host]], like=first,
                          extra_config=extra_config, netns_prefix=hosts.prefix(host))
            servers[host] = server
            server.start()
        yield servers
    finally:
        for server in reversed(list(servers.values())):
            server.stop()
