"""Horovod 0.28's elastic rules as a Horovod user checks them: job size up to --max-np, hosts
in the order they are listed, a failing worker blacklisting its host, failing at once when
nothing is left, --elastic-timeout and --reset-limit, cooldowns with back-off, and a stopped
worker found by its silence. Real horovodrun, embedded daemon, the PyTorch elastic_probe.py
workers on this machine under three host names (localhost, 127.0.0.1 and its hostname)."""

import os
import re
import signal
import socket
import sys
from pathlib import Path

from harness import BUILD, DISCOVER_HOSTS, HostsFile

PYTHON = "/usr/bin/python3"
PROBE = Path(__file__).resolve().parent / "elastic_probe.py"
A, B, C = "localhost", "127.0.0.1", socket.gethostname()

READY = re.compile(r"generation (\d+) ready: size (\d+) on (\S+)")
EPOCH = re.compile(r"\[0\]<stdout>:probe epoch=(\d+) batch=(\d+) commits=(\d+) host=(\S+) "
                   r"spawn_rank=(\S+) rank=(\d+) size=(\d+) entries=(\d+)")
ENTER = re.compile(r"probe enter rank=(\d+) size=(\d+) host=(\S+) spawn_rank=(\S+) "
                   r"entries=(\d+) pid=(\d+)")


def probe_env():
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(BUILD / "python"),
                                                     os.environ.get("PYTHONPATH")) if p)}
    return env


def start(horovodrun, tmp_path, *options, probe_args=()):
    # A generous --start-timeout: several interpreters importing torch at once on a loaded
    # 2-core machine take their time.
    return horovodrun("--verbose", "--start-timeout", 120, *options, PYTHON, PROBE,
                      "--marker-dir", tmp_path, *probe_args, env=probe_env())


def readies(run):
    """[(generation, size, [host by rank])] of every generation that formed."""
    out = []
    for line in run.lines:
        m = READY.search(line)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), m.group(3).split(",")))
    return out


def epochs(run):
    return [{"epoch": int(m.group(1)), "host": m.group(4), "spawn_rank": m.group(5),
             "size": int(m.group(7)), "entries": int(m.group(8))}
            for m in (EPOCH.search(l) for l in list(run.lines)) if m]


def wait_ready(run, size, hosts=None, after=0):
    """Waits for a generation above `after` of `size` (on `hosts`, by rank); returns it."""
    def found(_lines):
        for ready in readies(run):
            if ready[0] > after and ready[1] == size and (hosts is None or ready[2] == hosts):
                return ready
        return None
    return run.wait_for(found, f"a generation of size {size} on {hosts}")


def wait_epoch(run, size, after_generation_line=0):
    """Waits for rank 0's end-of-epoch line at `size`."""
    return run.wait_for(lambda _l: [e for e in epochs(run) if e["size"] == size],
                        f"an epoch at size {size}")


def assert_no_false_loss(run):
    assert "lost:" not in run.output(), run.output()


def test_size_follows_discovery_up_to_max_np_in_listed_order(horovodrun, tmp_path):
    # Rank 0 goes on the first host printed (127.0.0.1), not the first by name.
    hosts = HostsFile(tmp_path, f"{B}:1\n{A}:1")
    stop = tmp_path / "stop"
    run = start(horovodrun, tmp_path, "-np", 2, "--min-np", 1, "--max-np", 3,
                "--host-discovery-script", DISCOVER_HOSTS, "--discovery-interval", 0.2,
                probe_args=("--epochs", 1, "--stop-file", stop))
    first = wait_ready(run, 2, [B, A])
    wait_epoch(run, 2)
    # Four more slots on localhost: the job grows to --max-np 3, not to -np 2 or to 5.
    hosts.write(f"{B}:1\n{A}:4")
    grown = wait_ready(run, 3, [B, A, A], after=first[0])
    wait_epoch(run, 3)
    # localhost goes away: its workers leave (not blacklisted: nothing failed).
    hosts.write(f"{B}:1")
    shrunk = wait_ready(run, 1, [B], after=grown[0])
    wait_epoch(run, 1)
    stop.touch()
    assert run.wait() == 0, run.output()
    assert [r[1] for r in readies(run)] == [2, 3, 1]
    assert shrunk[0] == grown[0] + 1
    # Rank 0 stayed the first worker started, on 127.0.0.1, throughout.
    assert {(e["host"], e["spawn_rank"], e["entries"] > 0) for e in epochs(run)} == \
        {(B, "0", True)}
    assert run.count(r"leaves: host localhost is no longer discovered") == 2
    assert "blacklisted" not in run.output()
    assert_no_false_loss(run)


def test_a_failing_rank_takes_its_host_out(horovodrun, tmp_path):
    # Discovery; rank 1 (on localhost) raises out of hvd.elastic.run in epoch 1. Its host is
    # blacklisted (no cooldown range: for the rest of the job), rank 0 there leaves too, and
    # the job goes on at size 2 on 127.0.0.1. One reset: --reset-limit 1 is not exceeded.
    HostsFile(tmp_path, f"{A}:2\n{B}:2")
    run = start(horovodrun, tmp_path, "-np", 4, "--min-np", 2, "--reset-limit", 1,
                "--host-discovery-script", DISCOVER_HOSTS, "--discovery-interval", 0.2,
                probe_args=("--epochs", 3, "--fail", "1:1:1:raise"))
    assert run.wait() == 0, run.output()
    assert [(r[1], r[2]) for r in readies(run)] == [(4, [A, A, B, B]), (2, [B, B])]
    assert run.count(r"worker \d+ \(rank 1, localhost, pid \d+\) exited with status 1; "
                     r"host localhost is blacklisted for the rest of the job") == 1
    assert run.count(r"\(rank 0, localhost, pid \d+\) leaves: host localhost is blacklisted") == 1
    final = epochs(run)[-1]
    assert (final["epoch"], final["size"], final["host"]) == (2, 2, B)
    assert "Traceback" in run.output() and "scheduled failure" in run.output()
    assert_no_false_loss(run)


def test_a_killed_rank_on_fixed_hosts_takes_its_host_out(horovodrun, tmp_path):
    # -H without a discovery script (elastic through --min-np): the same rule. Rank 2 (on
    # 127.0.0.1) SIGKILLs itself; the job goes on with localhost's two slots.
    run = start(horovodrun, tmp_path, "-np", 4, "--min-np", 2, "-H", f"{A}:2,{B}:2",
                probe_args=("--epochs", 3, "--fail", "2:1:1:kill"))
    assert run.wait() == 0, run.output()
    assert [(r[1], r[2]) for r in readies(run)] == [(4, [A, A, B, B]), (2, [A, A])]
    assert run.count(r"\(rank 2, 127\.0\.0\.1, pid \d+\) killed by signal 9.*; "
                     r"host 127\.0\.0\.1 is blacklisted") == 1
    final = epochs(run)[-1]
    assert (final["epoch"], final["size"], final["host"], final["spawn_rank"]) == (2, 2, A, "0")
    assert_no_false_loss(run)


def test_every_rank_failing_fails_the_job_at_once(horovodrun, tmp_path):
    # Nothing is left to run on: exit 1 with Horovod's message, long before the 600 s
    # --elastic-timeout (the job deadline here is a fifth of it).
    run = start(horovodrun, tmp_path, "-np", 2, "--min-np", 1, "-H", f"{A}:2",
                "--elastic-timeout", 600, probe_args=("--fail", "*:0:1:raise"))
    assert run.wait(timeout=120) == 1, run.output()
    last = run.lines[-1]
    assert "Horovod detected that one or more processes exited with non-zero status" in last
    assert re.search(r"The first process to do so was worker \d+ \((rank \d, )?localhost, "
                     r"pid \d+\) exited with status 1", last), run.output()
    assert "could not reach" not in run.output()


def test_one_failure_on_each_of_two_hosts_leaves_the_third(horovodrun, tmp_path):
    run = start(horovodrun, tmp_path, "-np", 4, "--min-np", 2, "-H", f"{A}:1,{B}:1,{C}:2",
                probe_args=("--epochs", 3, "--fail", f"@{A}:1:1:raise",
                            "--fail", f"@{B}:1:1:kill"))
    assert run.wait() == 0, run.output()
    sizes = readies(run)
    assert sizes[0][1:] == (4, [A, B, C, C])
    assert sizes[-1][1:] == (2, [C, C])
    for host in (A, B):
        assert run.count(rf"host {re.escape(host)} is blacklisted for the rest of the job") == 1
    final = epochs(run)[-1]
    assert (final["epoch"], final["size"], final["host"]) == (2, 2, C)
    assert_no_false_loss(run)


def test_min_np_not_reached_within_elastic_timeout(horovodrun, tmp_path):
    # At the start: one slot for --min-np 2. No worker is started.
    HostsFile(tmp_path, f"{A}:1")
    run = start(horovodrun, tmp_path, "--min-np", 2, "--host-discovery-script",
                DISCOVER_HOSTS, "--elastic-timeout", 3)
    assert run.wait() == 1, run.output()
    assert "could not reach --min-np 2 within --elastic-timeout 3s (1 usable slot(s))" in \
        run.lines[-1], run.output()
    assert run.count(r"started worker") == 0

    # After a reset: 127.0.0.1's worker fails, localhost's alone is below --min-np 2.
    run = start(horovodrun, tmp_path, "-np", 2, "--min-np", 2, "-H", f"{A}:1,{B}:1",
                "--elastic-timeout", 5, probe_args=("--fail", f"@{B}:0:1:raise"))
    assert run.wait() == 1, run.output()
    assert "could not reach --min-np 2 within --elastic-timeout 5s (1 usable slot(s))" in \
        run.lines[-1], run.output()
    assert run.count(r"host 127\.0\.0\.1 is blacklisted") == 1


def test_reset_limit_exceeded(horovodrun, tmp_path):
    # Two failures, two resets, for --reset-limit 1: the second one ends the job.
    run = start(horovodrun, tmp_path, "-np", 3, "--min-np", 1, "-H", f"{A}:1,{B}:1,{C}:1",
                "--reset-limit", 1,
                probe_args=("--epochs", 4, "--fail", "2:1:1:raise", "--fail", "1:2:1:raise"))
    assert run.wait() == 1, run.output()
    assert "Horovod was shutdown because number of resets during elastic job exceeded " \
           "limit: 1" in run.lines[-1], run.output()
    assert [r[1] for r in readies(run)] == [3, 2]


def test_blacklisted_host_comes_back_after_its_cooldown_with_back_off(horovodrun, tmp_path):
    # --blacklist-cooldown-range 2 30: LO * 2^n, so 4 s the first time and 8 s the second.
    stop = tmp_path / "stop"
    run = start(horovodrun, tmp_path, "-np", 2, "--min-np", 1, "-H", f"{A}:1,{B}:1",
                "--blacklist-cooldown-range", 2, 30,
                probe_args=("--epochs", 1, "--stop-file", stop, "--fail", f"@{B}:1:1:raise"))
    first = wait_ready(run, 2, [A, B])
    run.wait_for_line(r"host 127\.0\.0\.1 is blacklisted for 4000 ms \(cooldown 1\)")
    alone = wait_ready(run, 1, [A], after=first[0])
    back = wait_ready(run, 2, [A, B], after=alone[0])
    # The returning worker is a new process on 127.0.0.1; kill it: a second failure.
    def returned(lines):
        pids = [int(m.group(6)) for m in (ENTER.search(l) for l in lines)
                if m and m.group(3) == B and int(m.group(2)) == 2]
        return pids[-1] if len(pids) >= 2 else None
    os.kill(run.wait_for(returned, "the returned worker's pid"), signal.SIGKILL)
    run.wait_for_line(r"host 127\.0\.0\.1 is blacklisted for 8000 ms \(cooldown 2\)")
    alone_again = wait_ready(run, 1, [A], after=back[0])
    wait_ready(run, 2, [A, B], after=alone_again[0])
    stop.touch()
    assert run.wait() == 0, run.output()
    out = run.output()
    order = [out.index("blacklisted for 4000 ms"), out.index("blacklisted for 8000 ms")]
    assert order == sorted(order)
    assert [r[1] for r in readies(run)] == [2, 1, 2, 1, 2]
    assert_no_false_loss(run)


def test_a_stopped_worker_is_found_by_its_silence(horovodrun, tmp_path):
    # The default --liveness-timeout (10 s): heartbeats come from their own thread, so a busy
    # or paused interpreter is not silent; a SIGSTOPped process is.
    stop = tmp_path / "stop"
    run = start(horovodrun, tmp_path, "-np", 3, "--min-np", 2, "-H", f"{A}:2,{B}:1",
                probe_args=("--epochs", 1, "--stop-file", stop))
    wait_ready(run, 3, [A, A, B])
    wait_epoch(run, 3)
    pid = run.wait_for(lambda lines: [int(m.group(6)) for m in (ENTER.search(l) for l in lines)
                                      if m and m.group(3) == B], "the worker on 127.0.0.1")[0]
    os.kill(pid, signal.SIGSTOP)
    try:
        run.wait_for_line(r"\(rank 2, 127\.0\.0\.1, pid \d+\) lost: silent for \d+ ms "
                          r"\(--liveness-timeout 10s\)")
        wait_ready(run, 2, [A, A])
        stop.touch()
        assert run.wait() == 0, run.output()
        assert run.count(r"lost:") == 1  # only the stopped one
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_every_host_blacklisted_at_once_keeps_every_survivor(horovodrun, tmp_path):
    # Issue #33 §6: one worker on each of the two hosts raises at the same step, so both
    # hosts are blacklisted. Removing the survivors would leave none, so they all stay: the
    # job goes on at size 2 with one worker on each host, rather than dropping one of them
    # and waiting --elastic-timeout below --min-np. No survivor is left in a collective of
    # the ended generation, and no stall warning names nobody.
    run = start(horovodrun, tmp_path, "-np", 4, "--min-np", 2, "-H", f"{A}:2,{B}:2",
                "--elastic-timeout", 600,
                probe_args=("--epochs", 3, "--fail", f"@{A}:1:1:raise",
                            "--fail", f"@{B}:1:1:raise"))
    assert run.wait(timeout=120) == 0, run.output()
    for host in (A, B):
        assert run.count(rf"host {re.escape(host)} is blacklisted for the rest of the job") \
            == 1, run.output()
    sizes = readies(run)
    assert sizes[0][1:] == (4, [A, A, B, B]), sizes
    assert sizes[-1][1] == 2 and sorted(sizes[-1][2]) == sorted([A, B]), sizes
    assert "the workers on blacklisted hosts stay" in run.output()
    assert "below --min-np" not in run.output(), run.output()
    assert "Missing ranks" not in run.output(), run.output()
    final = epochs(run)[-1]
    assert (final["epoch"], final["size"]) == (2, 2), run.output()
    assert_no_false_loss(run)
