"""Multi-host jobs over SSH: 127.0.0.2 and 127.0.0.3 stand for two hosts, each
reached through a private sshd (sshd.py) by the daemon's libssh launcher, so
every worker runs under an SSH session even though all run on this machine.
127.0.0.4 is a host where nothing listens; 127.0.0.10 one that never answers."""

import os
import re
import signal
import shutil
import socket
import subprocess
import threading
import time

import pytest

from harness import BUILD, DISCOVER_HOSTS, ELASTIC_TRAIN, EVENT_DEADLINE, HostsFile, read_result, \
    wait_pid_gone

RANK_PROBE = BUILD / "tests" / "integration" / "rank_probe"
PROBE_LINE = re.compile(
    r"probe rank (\d+)/(\d+) local (\d+)/(\d+) cross (\d+)/(\d+) host (\S+) pid (\d+)")
STARTED_LINE = re.compile(r"started worker \d+ on (\S+) \(pid (\d+)\)")
SAMPLES = 4096


@pytest.fixture(autouse=True)
def no_sessions_left(sshd):
    """Whatever a test left running under sshd is killed by PID after it."""
    if not RANK_PROBE.exists():
        pytest.fail(f"build first: missing {RANK_PROBE}")
    yield
    sshd.kill_sessions()


def ssh_args(sshd, tmp_path, checking=None):
    return sshd.client_args(tmp_path / "known_hosts", checking)


def train_args(tmp_path, delay_ms=25, epochs=3):
    return [ELASTIC_TRAIN, "--epochs", epochs, "--samples", SAMPLES, "--step-delay-ms", delay_ms,
            "--output", tmp_path / "result.json"]


def probes(run):
    """{rank: (size, local, local_size, cross, cross_size, host, pid)} of the probe lines."""
    found = {}
    for line in run.lines:
        m = PROBE_LINE.search(line)
        if m:
            rank, size, local, local_size, cross, cross_size = map(int, m.groups()[:6])
            found[rank] = (size, local, local_size, cross, cross_size, m.group(7), int(m.group(8)))
    return found


def started_hosts(run):
    """{pid: host} of the workers the daemon started (needs --verbose)."""
    return {int(m.group(2)): m.group(1) for m in STARTED_LINE.finditer(run.output())}


def accepted_logins(sshd):
    return sshd.log.read_text().count("Accepted publickey")


def process_lines_with(marker):
    """The ps lines of processes whose command line holds `marker`."""
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines()[1:] if marker in l and " Z" not in l
            and "ps -eo" not in l]


def test_static_two_host_job_gets_ranks_per_host(horovodrun, sshd, tmp_path):
    logins = accepted_logins(sshd)
    run = horovodrun("-np", 4, "-H", "127.0.0.2:2,127.0.0.3:2", "--verbose",
                     *ssh_args(sshd, tmp_path), RANK_PROBE)
    assert run.wait() == 0, run.output()
    found = probes(run)
    assert sorted(found) == [0, 1, 2, 3], run.output()
    by_host = {}
    for rank, (size, local, local_size, cross, cross_size, host, pid) in found.items():
        assert size == 4 and local_size == 2 and cross_size == 2
        by_host.setdefault(host, []).append((rank, local, cross))
    assert sorted(by_host) == ["127.0.0.2", "127.0.0.3"]
    # Each host's local ranks are 0 and 1; its cross rank is its index among the hosts.
    for index, host in enumerate(["127.0.0.2", "127.0.0.3"]):
        assert sorted(local for _, local, _ in by_host[host]) == [0, 1]
        assert {cross for _, local, cross in by_host[host]} == {index}
    # The pid the daemon reports is the remote process's own, and every one
    # came through an SSH login.
    assert started_hosts(run) == {pid: host for (_, _, _, _, _, host, pid) in found.values()}
    assert accepted_logins(sshd) - logins >= 4
    assert (tmp_path / "known_hosts").read_text().count(f"]:{sshd.port} ") == 2  # accept-new


def test_static_two_host_training_converges(horovodrun, sshd, tmp_path):
    run = horovodrun("-np", 4, "-H", "127.0.0.2:2,127.0.0.3:2",
                     *ssh_args(sshd, tmp_path), *train_args(tmp_path, delay_ms=0))
    workers = run.wait_for_size(4)
    assert sorted(workers) == [0, 1, 2, 3]
    assert run.wait() == 0, run.output()
    result = read_result(tmp_path / "result.json")
    assert result["final_size"] == 4
    assert result["weight_error"] < 0.01
    assert run.count(r"^\[0\]<stdout>:epoch 3/3") == 1


def test_discovery_adds_and_removes_a_host(horovodrun, sshd, tmp_path):
    hosts = HostsFile(tmp_path, "127.0.0.2:2")
    run = horovodrun("-np", 2, "--min-np", 2, "--max-np", 4, "--host-discovery-script",
                     DISCOVER_HOSTS, "--discovery-interval", "0.2", "--verbose", *ssh_args(sshd, tmp_path), *train_args(tmp_path, delay_ms=40))
    first = run.wait_for_size(2)
    hosts.write("127.0.0.2:2\n127.0.0.3:2")
    grown = run.wait_for_size(4)
    assert grown[0] == first[0] and grown[1] == first[1]
    on_host = started_hosts(run)
    assert [on_host[grown[r]] for r in range(4)] == ["127.0.0.2"] * 2 + ["127.0.0.3"] * 2
    hosts.write("127.0.0.2:2")
    after = run.wait_for_size(2)
    assert after == {0: first[0], 1: first[1]}
    # The workers of the removed host leave, and nothing of theirs is left there.
    for rank in (2, 3):
        wait_pid_gone(grown[rank])
    assert run.wait() == 0, run.output()
    result = read_result(tmp_path / "result.json")
    assert result["final_size"] == 2
    assert result["resets"] >= 2


def test_unreachable_host_sits_out_a_cooldown(horovodrun, sshd, tmp_path):
    run = horovodrun("-np", 3, "--min-np", 2, "--max-np", 3, "-H", "127.0.0.2:2,127.0.0.4:1",
                     "--blacklist-cooldown-range", 120, 240, *ssh_args(sshd, tmp_path),
                     *train_args(tmp_path, delay_ms=0))
    run.wait_for_line(r"cannot start a worker on 127\.0\.0\.4: cannot connect to 127\.0\.0\.4 "
                      rf"port {sshd.port} over SSH: .*refused.*host in cooldown",
                      "the unreachable host's cooldown")
    run.wait_for_size(2)
    assert run.wait() == 0, run.output()
    assert read_result(tmp_path / "result.json")["final_size"] == 2


def test_a_silent_host_is_found_by_the_liveness_check(horovodrun, sshd, tmp_path):
    run = horovodrun("-np", 4, "--min-np", 2, "--max-np", 4, "-H", "127.0.0.2:2,127.0.0.3:2",
                     "--liveness-timeout", 3, "--blacklist-cooldown-range", 120, 240, "--verbose",
                     *ssh_args(sshd, tmp_path), *train_args(tmp_path, delay_ms=25))
    workers = run.wait_for_size(4)
    run.wait_for_line(r"epoch 1/3", "the first epoch to end")
    on_host = started_hosts(run)
    silent = [pid for pid in workers.values() if on_host[pid] == "127.0.0.3"]
    assert len(silent) == 2
    try:
        for pid in silent:
            os.kill(pid, signal.SIGSTOP)
        run.wait_for_line(r"lost: silent for .*--liveness-timeout 3", "the liveness check")
        for pid in silent:
            wait_pid_gone(pid)
        after = run.wait_for_size(2)
        assert sorted(on_host[pid] for pid in after.values()) == ["127.0.0.2"] * 2
        assert run.wait() == 0, run.output()
        assert read_result(tmp_path / "result.json")["final_size"] == 2
    finally:
        for pid in silent:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


WORKER_SCRIPT = """#!/bin/sh
# A worker with a helper process of its own: both must end on cancel.
"$(dirname "$0")/sleeper" 300 &
exec {probe} --hold
"""


def test_cancel_leaves_no_process_on_any_host(horovodrun, sshd, tmp_path):
    # Everything the job starts carries tmp_path (unique to this test) in its command line.
    shutil.copy("/bin/sleep", tmp_path / "sleeper")
    worker = tmp_path / "worker.sh"
    worker.write_text(WORKER_SCRIPT.format(probe=RANK_PROBE))
    worker.chmod(0o755)
    run = horovodrun("-np", 3, "-H", "127.0.0.2:2,127.0.0.3:1", *ssh_args(sshd, tmp_path), worker)
    run.wait_for(lambda lines: len(probes(run)) == 3, "all three workers to join")
    holders = [p[6] for p in probes(run).values()]
    marker = str(tmp_path)
    assert len(process_lines_with(marker)) >= 3  # the helpers (and the worker scripts)
    run.proc.send_signal(signal.SIGINT)
    assert run.wait() == 130, run.output()
    assert "CANCELLED" in run.output()
    for pid in holders:
        wait_pid_gone(pid)
    deadline = time.monotonic() + EVENT_DEADLINE
    while process_lines_with(marker):
        assert time.monotonic() < deadline, "\n".join(process_lines_with(marker))
        time.sleep(0.1)


def test_a_changed_host_key_is_refused_naming_host_and_file(horovodrun, sshd, tmp_path):
    known_hosts = tmp_path / "known_hosts"
    wrong_key = " ".join(sshd.identity.with_suffix(".pub").read_text().split()[:2])
    known_hosts.write_text(sshd.host_key_line("127.0.0.2") + "\n"
                           + f"[127.0.0.3]:{sshd.port} {wrong_key}\n")
    logins = accepted_logins(sshd)
    run = horovodrun("-np", 2, "--min-np", 1, "--max-np", 2, "-H", "127.0.0.2:1,127.0.0.3:1",
                     "--blacklist-cooldown-range", 120, 240,
                     *ssh_args(sshd, tmp_path, checking="strict"), RANK_PROBE)
    run.wait_for_line(
        rf"cannot start a worker on 127\.0\.0\.3: the host key of 127\.0\.0\.3 port {sshd.port} "
        rf"does not match the one recorded for it in {re.escape(str(known_hosts))}",
        "the refused host key")
    assert run.wait() == 0, run.output()
    found = probes(run)
    assert [p[5] for p in found.values()] == ["127.0.0.2"]
    # 127.0.0.3 was never logged in to.
    assert accepted_logins(sshd) - logins == 1


class SilentSshServer:
    """Accepts TCP connections on (address, port) and never answers: an SSH client waits
    there for the server's greeting until its own timeout (10 s per step in horovodd)."""

    def __init__(self, address, port):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((address, port))
        self.listener.listen(8)
        self.connections = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed
                return
            with self._cond:
                self.connections.append(conn)
                self._cond.notify_all()

    def wait_for_connection(self, timeout=EVENT_DEADLINE):
        with self._cond:
            if not self._cond.wait_for(lambda: self.connections, timeout):
                raise AssertionError("the daemon never connected to the silent host")

    def connection_open(self):
        """Whether the first connection is still open on the client's side."""
        conn = self.connections[0]
        while True:
            try:
                data = conn.recv(4096, socket.MSG_DONTWAIT)  # the client's greeting, if any
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False

    def close(self):
        self.listener.close()
        with self._cond:
            for conn in self.connections:
                conn.close()


def test_a_host_that_never_answers_holds_up_no_other_launch(horovodrun, sshd, tmp_path):
    # 127.0.0.10 sorts before 127.0.0.2, so its worker is the first one launched.
    silent = SilentSshServer("127.0.0.10", sshd.port)
    try:
        run = horovodrun("-np", 3, "--min-np", 2, "--max-np", 3, "-H", "127.0.0.10:1,127.0.0.2:2",
                         "--blacklist-cooldown-range", 120, 240, "--verbose",
                         *ssh_args(sshd, tmp_path), *train_args(tmp_path, delay_ms=0))
        silent.wait_for_connection()
        # Both workers of the host that answers start while the daemon still waits for the
        # silent host's greeting: launches run beside each other, off the job's loop.
        run.wait_for(lambda lines: sorted(started_hosts(run).values()) == ["127.0.0.2"] * 2,
                     "both workers on 127.0.0.2 to start")
        assert silent.connection_open(), run.output()
        assert "cannot start a worker on 127.0.0.10" not in run.output()
        # Now the silent host hangs up: its launch fails, it sits out a cooldown, and the job
        # goes on with the two that started.
        silent.close()
        run.wait_for_line(r"cannot start a worker on 127\.0\.0\.10: .*host in cooldown",
                          "the silent host's cooldown")
        assert sorted(run.wait_for_size(2)) == [0, 1]
        assert run.wait() == 0, run.output()
        assert read_result(tmp_path / "result.json")["final_size"] == 2
    finally:
        silent.close()


DAEMON_LINE = re.compile(r"embedded daemon on 127\.0\.0\.1:(\d+)")
WORKER_DAEMON_LINE = re.compile(r"\[(\d+)\]<stdout>:daemon at (\S+)")


def test_remote_workers_reach_a_loopback_daemon_through_their_ssh_session(
        horovodrun, sshd, tmp_path):
    # The embedded daemon listens on 127.0.0.1 only, which a real remote host
    # cannot dial: each remote worker is told a port on its own host that its
    # SSH session forwards back to the daemon.
    worker = tmp_path / "worker.sh"
    worker.write_text(f'#!/bin/sh\necho "daemon at $HOROVODD_DAEMON_ADDR"\nexec {RANK_PROBE}\n')
    worker.chmod(0o755)
    run = horovodrun("-np", 3, "-H", "127.0.0.2:2,127.0.0.3:1", "--verbose",
                     *ssh_args(sshd, tmp_path), worker)
    assert run.wait() == 0, run.output()
    daemon_port = int(DAEMON_LINE.search(run.output()).group(1))
    told = {}
    for line in run.lines:
        m = WORKER_DAEMON_LINE.search(line)
        if m:
            told[int(m.group(1))] = m.group(2)
    assert len(told) == 3, run.output()
    ports = set()
    for address in told.values():
        host, port = address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) != daemon_port, told
        ports.add(int(port))
    assert len(ports) == 3, told  # one forward per worker's session
    # Every worker rendezvoused through its tunnel and passed a barrier.
    assert sorted(probes(run)) == [0, 1, 2], run.output()


def test_a_host_that_refuses_port_forwarding_is_named_and_sits_out(horovodrun, sshd, tmp_path):
    from sshd import Sshd

    refusing = Sshd(tmp_path / "sshd-no-forwarding", addresses=("127.0.0.5",),
                    extra_config=["AllowTcpForwarding no"], like=sshd).start()
    try:
        run = horovodrun("-np", 3, "--min-np", 2, "--max-np", 3, "-H", "127.0.0.2:2,127.0.0.5:1",
                         "--blacklist-cooldown-range", 120, 240, *ssh_args(sshd, tmp_path),
                         *train_args(tmp_path, delay_ms=0))
        run.wait_for_line(r"cannot start a worker on 127\.0\.0\.5: 127\.0\.0\.5.* refused to "
                          r"forward a port back to the daemon.*AllowTcpForwarding.*host in "
                          "cooldown", "the refusing host's cooldown")
        run.wait_for_size(2)
        assert run.wait() == 0, run.output()
        assert read_result(tmp_path / "result.json")["final_size"] == 2
    finally:
        refusing.stop()


def test_a_tunnel_does_not_make_a_worker_host_local_to_the_daemon(
        horovodd, horovodrun, sshd, tmp_path):
    # open_read_only: loopback lets the users of the daemon's host list jobs
    # without a token. A remote worker's tunnel reaches the daemon from its
    # loopback too, but the users of that worker's host must still need one.
    horovodctl = BUILD / "bin" / "horovodctl"
    daemon = horovodd("--open-read-only", "loopback")
    worker = tmp_path / "worker.sh"
    worker.write_text(f'#!/bin/sh\n{horovodctl} --daemon "$HOROVODD_DAEMON_ADDR" list\n'
                      'echo "list exited $?"\n')
    worker.chmod(0o755)
    run = horovodrun(*daemon.client_args(), "-np", 1, "-H", "127.0.0.2:1",
                     *ssh_args(sshd, tmp_path), worker)
    assert run.wait() == 0, run.output()
    assert run.count(r"^\[0\]<stdout>:list exited 1$") == 1, run.output()
    assert "the daemon requires a token" in run.output()
    # The same call from the daemon's own host, without a token, is let through.
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVODD_")}
    local = subprocess.run([str(horovodctl), "--daemon", daemon.address, "list"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert local.returncode == 0, local.stderr


def test_a_hot_spare_on_another_host_takes_a_killed_workers_place(horovodrun, sshd, tmp_path):
    # The job trains on localhost and 127.0.0.2 (--max-np 2); the spare, started over SSH like
    # any worker, waits on 127.0.0.3. Rank 1 is killed: its host is blacklisted, and the spare
    # takes rank 1 in one reset at size 2.
    run = horovodrun("-np", 2, "--min-np", 1, "--max-np", 2, "--hot-spares", 1, "-H",
                     "localhost:1,127.0.0.2:1,127.0.0.3:1", "--verbose",
                     *ssh_args(sshd, tmp_path), *train_args(tmp_path, delay_ms=25, epochs=6))
    before = run.wait_for_size(2)
    spare = run.wait_for_line(r"started spare (\d+) on 127\.0\.0\.3 \(pid (\d+)\)", "the spare")
    spare_id, spare_pid = int(spare.group(1)), int(spare.group(2))
    run.wait_for_line(rf"spare {spare_id} on 127\.0\.0\.3 is ready", "the spare to wait")
    run.wait_for_line(r"epoch 1/6", "the first epoch to end")
    os.kill(before[1], signal.SIGKILL)
    run.wait_for_line(rf"horovodrun: spare {spare_id} on 127\.0\.0\.3 took rank 1 ", "the swap")
    assert run.wait() == 0, run.output()
    assert run.workers() == {0: before[0], 1: spare_pid}
    assert run.count(r"generation \d+ ready: size 2 on localhost,127\.0\.0\.3 \(reset took") == 1
    assert run.count(r"reset took \d+ ms") == 1
    result = read_result(tmp_path / "result.json")
    assert result["samples_per_epoch"] == [SAMPLES] * 6
    assert result["final_size"] == 2 and result["resets"] == 1
