"""Job records in etcd (issue 36, `horovodd --store etcd://...`): with a real
three-member etcd cluster on loopback, a running elastic job survives a
SIGKILL of its daemon exactly as with the SQLite journal (taken back from
etcd: same workers, no reset, every sample of every epoch once), with one
etcd member killed meanwhile; a daemon on another state dir (another
machine's) lists the jobs the first one recorded. Leaders, standbys and the
takeover: test_ha_takeover.py.

Every etcd member, daemon, shim and worker is ended by PID at the end."""

import signal

import pytest

from etcd_cluster import EtcdCluster
from harness import assert_succeeded
from harness import (Daemon, HostsFile, _pid_alive, daemons, read_result, running_pids,
                     submit_elastic_train, wait_pid_gone)

SAMPLES = 2048


@pytest.fixture
def etcd(tmp_path):
    cluster = EtcdCluster(tmp_path / "etcd", members=3)
    yield cluster
    cluster.cleanup()


def store_config(tmp_path, etcd, lease_ttl=5):
    config = tmp_path / "horovodd.yaml"
    config.write_text(f"store: {etcd.url}\netcd:\n  prefix: /hvdd-test/\n"
                      f"  lease_ttl: {lease_ttl}s\n")
    return config


def test_a_job_outlives_its_daemon_and_an_etcd_member_with_its_records_in_etcd(
        daemons, etcd, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    config = store_config(tmp_path, etcd)
    daemon = daemons.start(config=config)
    # Logged on stderr beside "listening" on stdout: either may come first.
    daemon.wait_for_output("job records in etcd://", "the daemon to say where its records are")
    job_id = submit_elastic_train(daemon, tmp_path, epochs=30, delay_ms=15, samples=SAMPLES)
    before = daemon.training(job_id, 2)
    pids = running_pids(before)

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    etcd.kill(0)  # one member of three: nothing changes
    assert all(_pid_alive(pid) for pid in pids), "a worker died with the daemon"

    daemon = daemons.start(config=config)
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back from etcd")
    assert running_pids(daemon.status(job_id)) == pids
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) == 0, daemon.output()
    result = read_result(tmp_path / "result.json")
    assert result["samples_per_epoch"] == [SAMPLES] * 30
    for pid in pids:
        wait_pid_gone(pid)

    # Another machine's daemon (its own state dir) reads the same records; it leads once
    # this one stopped (SIGTERM gives the leadership up at once).
    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    other = Daemon(tmp_path / "other-state", cwd=tmp_path, config=config)
    try:
        jobs = other.jobs()
        assert jobs[job_id]["state"] == "SUCCEEDED", jobs
    finally:
        other.cleanup()
