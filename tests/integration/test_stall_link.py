"""A half-broken link (issue #34): two hosts that are really apart (netns_hosts.TwoHosts, an sshd
in each, horovodrun on host A), one rank on each, training an elastic PyTorch job
(stall_probe.py). Mid-training, host B's packets to host A stop on the wire (B's SSH session, which
carries B's worker to the daemon, still passes), while both processes live and every rank has
submitted its collective. The daemon names the link by its two ends (rank, host and pid of each)
within the warning time plus a second; past the shutdown time it evicts the awaited end (the rank
whose data the other waits for), its host is blacklisted, and the job finishes at size 1 with every
sample of every epoch exactly once. (TCP makes a one-way loss stall both ways: which end waits for
which is a race, so either end may be the awaited one; the rules are the same.)

The kernel here has no netem nor prio qdisc: the drop is an htb class whose leaf (pfifo limit 0)
drops every packet the u32 filter sends it (netns_hosts.Hosts.drop)."""

import re
import time
from pathlib import Path

import pytest

import netns_hosts
from harness import BUILD, read_result

PYTHON = "/usr/bin/python3"
PROBE = Path(__file__).resolve().parent / "stall_probe.py"
SAMPLES = 256
EPOCHS = 2
WARNING, SHUTDOWN = 3, 6
ENTER = re.compile(r"stall_probe enter rank=(\d+) size=(\d+) spawn_rank=\S+ pid=(\d+) host=(\S+)")
NAMED = re.compile(r"horovodrun: stall: link between rank (\d+) \((\S+), pid (\d+)\) and "
                   r"rank (\d+) \((\S+), pid (\d+)\) stalled: .* waited ([0-9.]+)s in ")

pytestmark = pytest.mark.skipif(not netns_hosts.available(),
                                reason="network namespaces need root, ip and tc")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """(TwoHosts, host A's sshd, host B's sshd); B's takes A's port and key."""
    with netns_hosts.TwoHosts() as two, \
            netns_hosts.with_sshd(two, tmp_path_factory.mktemp("netns-sshd")) as servers:
        yield two, servers[0], servers[1]


def test_a_link_dropping_one_way_is_named_by_its_ends_and_the_awaited_end_evicted(
        horovodrun, hosts, tmp_path):
    two, a, b = hosts
    run = horovodrun("-np", 2, "--min-np", 1, "--max-np", 2, "-H", "127.0.0.2:1,127.0.0.3:1",
                     *a.client_args(tmp_path / "known_hosts"),
                     "--stall-check-warning-time-seconds", WARNING,
                     "--stall-check-shutdown-time-seconds", SHUTDOWN,
                     PYTHON, PROBE, "--marker-dir", tmp_path, "--samples", SAMPLES,
                     "--epochs", EPOCHS, "--step-delay-ms", 250,
                     "--output", tmp_path / "result.json",
                     env={"PYTHONPATH": str(BUILD / "python")}, prefix=two.prefix(0))
    try:
        entered = run.wait_for(
            lambda lines: (lambda found: found if len(found) == 2 else None)(
                {int(m.group(1)): (int(m.group(3)), m.group(4))
                 for m in map(ENTER.search, lines) if m and m.group(2) == "2"}),
            "both ranks training at size 2")
        # A few steps in, host B's packets to host A stop (both processes live on).
        time.sleep(1.0)
        two.drop(1, 0, keep_sport=b.port)
        dropped = time.monotonic()
        try:
            match = run.wait_for(lambda lines: next(filter(None, map(NAMED.search, lines)), None),
                                 "the link's stall named")
            named = time.monotonic()
            # The evicted end gone, the link is whole again for what follows.
            run.wait_for(lambda lines: any("evicted: held up" in line for line in lines),
                         "the awaited end evicted")
        finally:
            two.restore(1)
        assert run.wait() == 0, run.output()
    finally:
        a.kill_sessions()
        b.kill_sessions()
    out = run.output()
    # Named by its two ends, each with its host and pid. Which end waits for which is a race: B's
    # ACKs are lost too, so A's data to B stops once A's send window is full, and either rank may
    # be the first to wait for the other's data.
    waiting = (int(match.group(1)), match.group(2), int(match.group(3)))
    awaited = (int(match.group(4)), match.group(5), int(match.group(6)))
    places = {0: (0, "127.0.0.2", entered[0][0]), 1: (1, "127.0.0.3", entered[1][0])}
    assert {waiting, awaited} == set(places.values()), (match.group(0), entered)
    assert f"rank {awaited[0]} (the awaited end) is evicted if it lasts" in out, out[-4000:]
    # Within the warning time plus a second of the collective's start (the daemon's account),
    # and of the drop as seen from here.
    assert WARNING <= float(match.group(7)) <= WARNING + 1, match.group(0)
    assert named - dropped <= WARNING + 2, (named - dropped, match.group(0))
    assert "culprits cannot be told apart" not in out
    # The awaited end alone was evicted, its host blacklisted; the job went on at size 1.
    evicted = [line for line in run.lines
               if " evicted: held up" in line and "SIGTERM, then" in line]
    assert len(evicted) == 1 and f"pid {awaited[2]}" in evicted[0], evicted
    assert any(f"pid {awaited[2]}" in line and f"host {awaited[1]} is blacklisted" in line
               for line in run.lines), out[-4000:]
    result = read_result(tmp_path / "result.json")
    assert result["final_size"] == 1, result
    assert result["epochs_completed"] == EPOCHS
    assert result["samples_per_epoch"] == [SAMPLES] * EPOCHS, result
    assert result["distinct_samples_per_epoch"] == [SAMPLES] * EPOCHS, result
