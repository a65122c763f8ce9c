"""Shared memory among the workers of one host, end to end: real horovodrun
and elastic_train workers. A worker using it maps its host's segment, an
anonymous memfd ("/memfd:horovodd-shm" in /proc/PID/maps, the same inode on
every worker of the host, a new one each generation); nothing is ever
created in /dev/shm, whatever dies when."""

import os
import re
import signal
import time

import pytest

from harness import ELASTIC_TRAIN, EVENT_DEADLINE, read_result, wait_pid_gone

SAMPLES = 4096
KILL_EPOCHS = 1500
SEGMENT = re.compile(r"\s(\d+)\s+/memfd:horovodd-shm")


def train_args(tmp_path, delay_ms=0, epochs=3):
    return [ELASTIC_TRAIN, "--epochs", epochs, "--samples", SAMPLES, "--step-delay-ms", delay_ms,
            "--output", tmp_path / "result.json"]


def dev_shm():
    return set(os.listdir("/dev/shm"))


def segments(pid):
    """The inodes of the horovodd segments `pid` maps (empty if it is gone)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return {int(m.group(1)) for m in SEGMENT.finditer(f.read())}
    except OSError:
        return set()


def wait_for_segments(pids, what, timeout=EVENT_DEADLINE):
    """Waits until every pid maps exactly one segment; returns {pid: inode}."""
    deadline = time.monotonic() + timeout
    while True:
        found = {pid: segments(pid) for pid in pids}
        if all(len(s) == 1 for s in found.values()):
            return {pid: next(iter(s)) for pid, s in found.items()}
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: segments mapped {found}")
        time.sleep(0.05)


def check_converged(tmp_path, final_size, epochs=3):
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == epochs
    assert result["final_size"] == final_size
    assert result["weight_error"] < 0.01
    return result


def test_local_workers_share_one_segment_and_leave_nothing(horovodrun, tmp_path):
    before = dev_shm()
    # A step delay keeps the job running while its maps are read (3 epochs take a
    # fraction of a second without one).
    run = horovodrun("-np", 3, "-H", "localhost:3", *train_args(tmp_path, delay_ms=5, epochs=3))
    workers = run.wait_for_size(3)
    mapped = wait_for_segments(workers.values(), "every local worker maps the segment")
    assert len(set(mapped.values())) == 1, mapped
    assert run.wait() == 0, run.output()
    check_converged(tmp_path, 3)
    assert dev_shm() == before


def test_shared_memory_off_keeps_every_collective_on_tcp(horovodrun, tmp_path):
    run = horovodrun("-np", 2, "-H", "localhost:2", *train_args(tmp_path, delay_ms=5),
                     env={"HOROVODD_SHM": "0"})
    workers = run.wait_for_size(2)
    run.wait_for_line(r"epoch 1/3", "the first epoch to end")
    assert all(segments(pid) == set() for pid in workers.values())
    assert run.wait() == 0, run.output()
    check_converged(tmp_path, 2)


def test_a_local_peer_killed_mid_collective_the_survivors_reset_and_finish(horovodrun, tmp_path):
    before = dev_shm()
    # No step delay, so the workers spend their time in collectives; enough epochs that
    # the job is still training at the kill and after the reset (3 ranks run an epoch in
    # tens of milliseconds here).
    run = horovodrun("-np", 3, "--min-np", 2, "--max-np", 3, "-H", "localhost:3",
                     *train_args(tmp_path, epochs=KILL_EPOCHS))
    workers = run.wait_for_size(3)
    first = wait_for_segments(workers.values(), "the first generation's segment")
    run.wait_for_line(rf"epoch 1/{KILL_EPOCHS}", "the first epoch to end")
    os.kill(workers[1], signal.SIGKILL)
    after = run.wait_for_size(2)
    assert sorted(after.values()) == sorted([workers[0], workers[2]])
    # The survivors' new generation has a segment of its own; the old one is gone with them.
    second = wait_for_segments(after.values(), "the second generation's segment")
    assert len(set(second.values())) == 1
    assert set(second.values()).isdisjoint(first.values())
    assert run.wait() == 0, run.output()
    assert check_converged(tmp_path, 2, epochs=KILL_EPOCHS)["resets"] >= 1
    assert dev_shm() == before


# "2": rank 0 decides every negotiation round for the host and the others take its result
# (by default only from 32 local ranks), before the kill and after.
@pytest.mark.parametrize("decider_from", [None, "2"], ids=["every-rank-decides", "rank-0-decides"])
def test_a_peer_only_its_neighbours_watch_killed_the_survivors_reset_and_finish(horovodrun,
                                                                                 tmp_path,
                                                                                 decider_from):
    # Five local workers: each watches its two neighbours among the local ranks, so ranks 0
    # and 4 do not watch rank 2; they learn of its death through the group its neighbours
    # fail (or the daemon's new generation), and the four survivors set up a new segment.
    before = dev_shm()
    env = {} if decider_from is None else {"HOROVODD_SHM_DECIDER_FROM": decider_from}
    run = horovodrun("-np", 5, "--min-np", 4, "--max-np", 5, "-H", "localhost:5",
                     *train_args(tmp_path, epochs=KILL_EPOCHS), env=env)
    workers = run.wait_for_size(5)
    first = wait_for_segments(workers.values(), "the first generation's segment")
    assert len(set(first.values())) == 1
    run.wait_for_line(rf"epoch 1/{KILL_EPOCHS}", "the first epoch to end")
    os.kill(workers[2], signal.SIGKILL)
    after = run.wait_for_size(4)
    assert sorted(after.values()) == sorted(pid for rank, pid in workers.items() if rank != 2)
    second = wait_for_segments(after.values(), "the second generation's segment")
    assert len(set(second.values())) == 1
    assert set(second.values()).isdisjoint(first.values())
    assert run.wait() == 0, run.output()
    assert check_converged(tmp_path, 4, epochs=KILL_EPOCHS)["resets"] >= 1
    assert dev_shm() == before


def test_sigkill_of_every_worker_leaves_nothing(horovodrun, tmp_path):
    before = dev_shm()
    run = horovodrun("-np", 2, "-H", "localhost:2", *train_args(tmp_path, delay_ms=5, epochs=50))
    workers = run.wait_for_size(2)
    wait_for_segments(workers.values(), "every worker maps the segment")
    # Stop them all first: once one is killed, the launcher may end (and reap) the other
    # before this loop gets to it, and a stopped worker cannot clean up after itself.
    for pid in workers.values():
        os.kill(pid, signal.SIGSTOP)
    for pid in workers.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the launcher killed and reaped it first
    assert run.wait() != 0
    for pid in workers.values():
        wait_pid_gone(pid)
    assert dev_shm() == before


# ---- two hosts over the SSH harness (tests/integration/sshd.py)

@pytest.fixture
def ssh_hosts(sshd, tmp_path):
    yield sshd.client_args(tmp_path / "known_hosts", None)
    sshd.kill_sessions()


@pytest.mark.parametrize("hierarchical", ["1", "0"])
def test_two_hosts_share_memory_within_and_tcp_across(horovodrun, ssh_hosts, tmp_path,
                                                      hierarchical):
    before = dev_shm()
    run = horovodrun("-np", 4, "-H", "127.0.0.2:2,127.0.0.3:2", *ssh_hosts,
                     *train_args(tmp_path), env={"HOROVOD_HIERARCHICAL_ALLREDUCE": hierarchical})
    workers = run.wait_for_size(4)
    mapped = wait_for_segments(workers.values(), "every worker maps its host's segment")
    # Ranks 0-1 are on 127.0.0.2, 2-3 on 127.0.0.3: one segment per host.
    assert mapped[workers[0]] == mapped[workers[1]]
    assert mapped[workers[2]] == mapped[workers[3]]
    assert mapped[workers[0]] != mapped[workers[2]]
    assert run.wait() == 0, run.output()
    check_converged(tmp_path, 4)
    assert dev_shm() == before
