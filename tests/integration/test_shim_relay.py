"""A host's shim relays its workers' daemon traffic on one stream (issue 37,
docs/architecture/shim-protocol.md#the-relay-a-hosts-workers-on-one-stream):
with HOROVODD_SHIM_RELAY=1 the daemon holds one AttachHost stream per host
and no worker stream of its own (its /metrics: horovodd_host_streams,
horovodd_attach_streams), through a SIGKILL of the daemon (the job is taken
back, same workers and generation, no reset, every sample once) and through
a SIGKILL of one host's shim (its workers die with it and are lost, as
without a relay; the job resets around them and finishes). Without the
switch the workers dial the daemon themselves, as before.

Real processes on loopback (harness.StandaloneDaemons; the SSH hosts are
the private sshd's 127.0.0.2 and 127.0.0.3, sshd.py); every process is
ended by PID at the end."""

import os
import signal
import subprocess
import time

import pytest

from harness import assert_succeeded
from harness import (CLI_DEADLINE, DISCOVER_HOSTS, ELASTIC_TRAIN, HOROVODRUN, HostsFile,
                     StandaloneDaemons, _pid_alive, read_result, running_pids, shim_pids,
                     submit_elastic_train, wait_for)
from remote_shims import remote_shim_pid, remote_shim_root, remove_remote_shims
from restart_checks import assert_finished_without_reset

SAMPLES = 2048
REMOTE_HOSTS = ["127.0.0.2", "127.0.0.3"]


def pool(tmp_path, relay):
    env = {"HOSTS_FILE": str(tmp_path / "hosts.txt")}
    if relay:
        env["HOROVODD_SHIM_RELAY"] = "1"  # the local shims inherit it from the daemon
    return StandaloneDaemons(tmp_path, env=env, metrics=True)


@pytest.fixture
def relayed(tmp_path):
    daemons = pool(tmp_path, relay=True)
    yield daemons
    daemons.cleanup()


@pytest.fixture
def direct(tmp_path):
    daemons = pool(tmp_path, relay=False)
    yield daemons
    daemons.cleanup()


def wait_streams(daemon, host_streams, attach_streams):
    """Waits until the daemon counts these streams open."""
    def counted():
        return (daemon.metric("horovodd_host_streams") == host_streams
                and daemon.metric("horovodd_attach_streams") == attach_streams)
    wait_for(counted, f"{host_streams} host stream(s) and {attach_streams} worker stream(s) "
             "at the daemon")


def shim_log(tmp_path, job_id):
    return (tmp_path / "state" / "shims" / f"{job_id}.log").read_text(errors="replace")


def test_one_host_stream_carries_a_hosts_workers_through_a_sigkill_of_the_daemon(
        relayed, tmp_path):
    HostsFile(tmp_path, "localhost:3")
    daemon = relayed.start()
    job_id = submit_elastic_train(daemon, tmp_path, epochs=40, delay_ms=15, np=3, min_np=3,
                                  max_np=3, samples=SAMPLES)
    before = daemon.training(job_id, 3)
    pids = running_pids(before)
    generation = before["generation"]
    # Three workers, one shim: one stream to the daemon, none of their own.
    wait_streams(daemon, host_streams=1, attach_streams=0)
    assert "relaying the workers' daemon traffic" in shim_log(tmp_path, job_id)
    assert len(shim_pids(tmp_path)) == 1

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    time.sleep(4)
    assert all(_pid_alive(pid) for pid in pids), "a worker died with the daemon"

    daemon = relayed.start()
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    after = daemon.status(job_id)
    assert after["state"] == "RUNNING", after
    assert running_pids(after) == pids
    assert after["generation"] == generation
    # The relay came back on one host stream; commits reach the new daemon through it.
    wait_streams(daemon, host_streams=1, attach_streams=0)
    wait_for(lambda: daemon.status(job_id).get("last_commit", 0) > after.get("last_commit", 0),
             "commits to reach the restarted daemon")

    assert_finished_without_reset(daemon, job_id, tmp_path / "result.json", 40, generation, pids)
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")


def test_without_the_switch_each_worker_dials_the_daemon_itself(direct, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    daemon = direct.start()
    job_id = submit_elastic_train(daemon, tmp_path, epochs=15, delay_ms=15, samples=SAMPLES)
    daemon.training(job_id, 2)
    wait_streams(daemon, host_streams=0, attach_streams=2)
    assert "relaying" not in shim_log(tmp_path, job_id)
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)


# ---- two SSH hosts, each with its shim and its relay


@pytest.fixture
def remote_relayed(tmp_path, sshd):
    daemons = pool(tmp_path, relay=False)  # remote shims take it from the job's environment
    yield daemons
    if daemons.started:
        remove_remote_shims(remote_shim_root(daemons.started[0].output()))
    daemons.cleanup()
    sshd.kill_sessions()


def submit_over_ssh(daemon, sshd, tmp_path, epochs, delay_ms, np, min_np):
    args = [HOROVODRUN, *daemon.client_args(), "--detach", "-np", np, "--min-np", min_np,
            "--max-np", np, "--host-discovery-script", DISCOVER_HOSTS,
            "--discovery-interval", 0.2, "--blacklist-cooldown-range", 1, 2,
            "--env", "HOROVODD_SHIM_RELAY=1", *sshd.client_args(tmp_path / "known_hosts"),
            ELASTIC_TRAIN, "--epochs", epochs, "--samples", SAMPLES, "--step-delay-ms", delay_ms,
            "--output", tmp_path / "result.json"]
    result = subprocess.run([str(a) for a in args], cwd=tmp_path, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=CLI_DEADLINE)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_sigkill_of_one_hosts_shim_loses_its_workers_and_the_job_goes_on(
        remote_relayed, sshd, tmp_path):
    HostsFile(tmp_path, "\n".join(f"{host}:2" for host in REMOTE_HOSTS))
    daemon = remote_relayed.start()
    job_id = submit_over_ssh(daemon, sshd, tmp_path, epochs=40, delay_ms=20, np=4, min_np=2)
    status = daemon.training(job_id, 4)
    pids = running_pids(status)
    remote_root = remote_shim_root(daemon.output())
    wait_for(lambda: len(shim_pids(remote_root)) == 2, "a shim on each host")
    # Two hosts of two workers: two host streams, one per host's relay.
    wait_streams(daemon, host_streams=2, attach_streams=0)

    gone_host = REMOTE_HOSTS[1]
    os.kill(remote_shim_pid(remote_root, job_id, gone_host), signal.SIGKILL)
    # Its workers die with it; the other host's go on.
    lost = [w["pid"] for w in status["workers"] if w.get("host") == gone_host]
    assert len(lost) == 2, status
    wait_for(lambda: not any(_pid_alive(pid) for pid in lost), "its workers to die with it")
    assert all(_pid_alive(pid) for pid in set(pids) - set(lost))

    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) >= 1, final
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 40
    assert result["samples_per_epoch"] == [SAMPLES] * 40
