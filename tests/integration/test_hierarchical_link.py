"""The hierarchical allreduce between hosts that are really apart: two network
namespaces joined by one veth pair (netns_hosts.TwoHosts), an sshd in each,
horovodrun on host A. What a user buys with HOROVOD_HIERARCHICAL_ALLREDUCE=1
is fewer bytes on the links between hosts; here they are counted at the
veth, for the same job flat and hierarchical, and every element of every
result is checked by the workers (rank_probe --allreduce)."""

import re

import pytest

import netns_hosts
from harness import BUILD

RANK_PROBE = BUILD / "tests" / "integration" / "rank_probe"
PROBE_LINE = re.compile(r"probe rank (\d+)/4 local (\d+)/2 cross (\d+)/2 host (\S+) pid")
# 2 allreduces of 16 MiB (the hierarchical one crosses in 4 pieces): 32 MiB
# of payload, against which the SSH logins, the daemon's tunnel and the
# rings' set-up are a few hundred KiB.
SIZE = 16 << 20
ITERATIONS = 2

pytestmark = pytest.mark.skipif(not netns_hosts.available(),
                                reason="network namespaces need root, ip and tc")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """(TwoHosts, host A's sshd, host B's sshd); B's takes A's port and key."""
    if not RANK_PROBE.exists():
        pytest.fail(f"build first: missing {RANK_PROBE}")
    with netns_hosts.TwoHosts() as two, \
            netns_hosts.with_sshd(two, tmp_path_factory.mktemp("netns-sshd")) as servers:
        yield two, servers[0], servers[1]


def run_job(horovodrun, hosts, tmp_path, hierarchical):
    """Runs the 2 x 2 job; returns the bytes it sent over the link each way."""
    two, a, b = hosts
    before = two.link_bytes()
    try:
        run = horovodrun("-np", 4, "-H", "127.0.0.2:2,127.0.0.3:2",
                         *a.client_args(tmp_path / "known_hosts"),
                         RANK_PROBE, "--allreduce", SIZE, ITERATIONS,
                         env={"HOROVOD_HIERARCHICAL_ALLREDUCE": hierarchical},
                         prefix=two.prefix(0))
        assert run.wait() == 0, run.output()
    finally:
        a.kill_sessions()
        b.kill_sessions()
    after = two.link_bytes()
    places = {int(m.group(1)): (int(m.group(2)), int(m.group(3)), m.group(4))
              for m in map(PROBE_LINE.search, run.lines) if m}
    # Ranks 0-1 on host A, 2-3 on host B, each host's ranks local to it.
    assert places == {0: (0, 0, "127.0.0.2"), 1: (1, 0, "127.0.0.2"),
                      2: (0, 1, "127.0.0.3"), 3: (1, 1, "127.0.0.3")}, run.output()
    assert run.count(rf"probe allreduce ok rank \d: {ITERATIONS} x {SIZE} bytes") == 4, \
        run.output()
    return after[0] - before[0], after[1] - before[1]


def test_hierarchical_allreduce_crosses_hosts_with_fewer_bytes(horovodrun, hosts, tmp_path):
    flat = run_job(horovodrun, hosts, tmp_path, "0")
    hierarchical = run_job(horovodrun, hosts, tmp_path, "1")
    payload = SIZE * ITERATIONS
    for direction, (f, h) in enumerate(zip(flat, hierarchical)):
        what = (f"{'A->B' if direction == 0 else 'B->A'}: flat {f} bytes, hierarchical {h}, "
                f"payload {payload}")
        # Each local rank's part (half the tensor) crosses once each way:
        # the payload's bytes per direction, plus headers and the job's own
        # traffic. Flat, the ring (not the pairwise exchange, whose every
        # rank would send to both ranks of the other host: 2 payloads) has
        # one rank on each host send 2 (n - 1) / n = 1.5 payloads across.
        assert payload <= h <= 1.25 * payload, what
        assert 1.5 * payload <= f <= 1.75 * payload, what
        assert h <= 0.75 * f, what
