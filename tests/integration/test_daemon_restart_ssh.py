"""Remote workers outlive horovodd too (issue 20): a standalone daemon's
elastic job over two SSH hosts (the private sshd on 127.0.0.2 and
127.0.0.3, sshd.py) trains on while the daemon is SIGKILLed; each host's
workers run under a horovodd-shim the daemon started there over SSH,
detached from the session. The daemon started again on the same state dir
and address reaches each shim again through a new SSH session and reopens
the workers' tunnel on the port they know: same workers, same generation,
no reset, every epoch's samples exactly once.

Real processes on loopback, modelled on test_daemon_restart.py (whose
helpers are used); every process is ended by PID at the end."""

import os
import signal
import subprocess
import time

import pytest

from harness import assert_succeeded
from harness import CLI_DEADLINE, DISCOVER_HOSTS, ELASTIC_TRAIN, HOROVODRUN, HostsFile, _pid_alive, \
    daemons, read_result, running_pids, shim_pids, wait_for  # noqa: F401 (daemons: the fixture)
from remote_shims import remote_shim_pid, remote_shim_root, remove_remote_shims
from restart_checks import assert_finished_without_reset
from test_daemon_restart import SAMPLES

HOSTS = ["127.0.0.2", "127.0.0.3"]


@pytest.fixture
def remote_cluster(daemons, sshd):
    """harness's daemons (on one address and state dir,
    ended by PID with their local shims); at the end the shims left on the
    SSH hosts are killed by PID too, and what sshd still runs."""
    started = []

    def start():
        started.append(daemons.start())
        return started[-1]

    yield start
    if started:
        remove_remote_shims(remote_shim_root(started[0].output()))
    sshd.kill_sessions()


def submit_over_ssh(daemon, sshd, tmp_path, epochs, delay_ms, min_np=2):
    """An elastic job of 2 (one worker per host), discovered from hosts.txt."""
    args = [HOROVODRUN, *daemon.client_args(), "--detach", "-np", 2, "--min-np", min_np,
            "--max-np", 2, "--host-discovery-script", DISCOVER_HOSTS,
            "--discovery-interval", 0.2, *sshd.client_args(tmp_path / "known_hosts"),
            ELASTIC_TRAIN, "--epochs", epochs, "--samples", SAMPLES, "--step-delay-ms", delay_ms,
            "--output", tmp_path / "result.json"]
    result = subprocess.run([*daemon.prefix, *map(str, args)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=CLI_DEADLINE)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def hosts_of(status):
    return sorted(w["host"] for w in status["workers"] if w.get("state") == "WORKER_RUNNING")


def test_remote_workers_train_through_a_sigkill_of_their_daemon(remote_cluster, sshd, tmp_path):
    HostsFile(tmp_path, "\n".join(f"{host}:1" for host in HOSTS))
    daemon = remote_cluster()
    job_id = submit_over_ssh(daemon, sshd, tmp_path, epochs=40, delay_ms=15)
    before = daemon.training(job_id, 2)
    pids = running_pids(before)
    generation = before["generation"]
    assert hosts_of(before) == HOSTS, before
    remote_root = remote_shim_root(daemon.output())
    # One shim per host, on the host (here both under this user's home), none here.
    wait_for(lambda: len(shim_pids(remote_root)) == 2, "a shim on each host")
    assert not shim_pids(tmp_path)

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    # Neither the daemon's death nor the end of its SSH sessions reaches them.
    time.sleep(4)
    assert all(_pid_alive(pid) for pid in pids), "a remote worker died with the daemon"

    daemon = remote_cluster()
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    after = daemon.status(job_id)
    assert after["state"] == "RUNNING", after
    assert running_pids(after) == pids
    assert hosts_of(after) == HOSTS
    assert sorted(h["host"] for h in after["hosts"]) == HOSTS
    assert after["generation"] == generation
    # The workers came back through their reopened tunnels: commits go on.
    wait_for(lambda: daemon.status(job_id).get("last_commit", 0) > after.get("last_commit", 0),
             "commits to reach the restarted daemon")

    assert_finished_without_reset(daemon, job_id, tmp_path / "result.json", 40, generation, pids)
    # The job is over: the shims end on their hosts.
    wait_for(lambda: not shim_pids(remote_root), "the remote shims to end")


def test_a_host_whose_shim_is_gone_after_the_restart_counts_its_workers_as_lost(
        remote_cluster, sshd, tmp_path):
    hosts = HostsFile(tmp_path, "\n".join(f"{host}:1" for host in HOSTS))
    daemon = remote_cluster()
    job_id = submit_over_ssh(daemon, sshd, tmp_path, epochs=30, delay_ms=15, min_np=1)
    pids = running_pids(daemon.training(job_id, 2))
    remote_root = remote_shim_root(daemon.output())

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    # While the daemon is away, 127.0.0.3's shim dies, and its worker with it.
    gone = remote_shim_pid(remote_root, job_id, HOSTS[1])
    os.kill(gone, signal.SIGKILL)
    wait_for(lambda: sum(_pid_alive(pid) for pid in pids) == 1, "its worker to die with it")
    hosts.write(f"{HOSTS[0]}:1")

    daemon = remote_cluster()
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    assert f"on {HOSTS[1]}" in daemon.output() and "count as lost" in daemon.output(), \
        daemon.output()
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) >= 1, final
    result = read_result(tmp_path / "result.json")
    assert result["samples_per_epoch"] == [SAMPLES] * 30
    assert result["final_size"] == 1
