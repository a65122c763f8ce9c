"""Job records in etcd (issue 36, `horovodd --store etcd://...`): with a real
three-member etcd cluster on loopback, a running elastic job survives a
SIGKILL of its daemon exactly as with the SQLite journal (taken back from
etcd: same workers, no reset, every sample of every epoch once), with one
etcd member killed meanwhile; a daemon on another state dir (another
machine's) lists the jobs the first one recorded. A standby started beside
the leader waits, and takes the running job over within the lease TTL once
the leader is SIGKILLed (the time is printed).

Every etcd member, daemon, shim and worker is ended by PID at the end."""

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from etcd_cluster import EtcdCluster
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
    assert "job records in etcd://" in daemon.output()
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
    assert final["state"] == "SUCCEEDED", (final, daemon.output())
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


def test_a_standby_takes_the_running_job_over_when_the_leader_is_killed(daemons, etcd, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    ttl = 3
    config = store_config(tmp_path, etcd, lease_ttl=ttl)
    leader = daemons.start(config=config)
    job_id = submit_elastic_train(daemon=leader, workdir=tmp_path, epochs=30, delay_ms=15,
                                  samples=SAMPLES)
    pids = running_pids(leader.training(job_id, 2))

    # The standby: same state dir and address (this host's shims, the workers' address); it
    # campaigns and does not serve while the leader leads.
    with ThreadPoolExecutor(1) as pool:
        standby_future = pool.submit(Daemon, daemons.state_dir, daemons.listen, cwd=tmp_path,
                                     env=daemons.env, config=config)
        time.sleep(2)
        assert not standby_future.done(), "the standby served beside the leader"
        assert leader.stop(signal.SIGKILL) == -signal.SIGKILL
        killed = time.monotonic()
        standby = standby_future.result(timeout=ttl + 60)
    daemons.started.append(standby)
    standby.wait_for_output(f"job {job_id} taken back", "the standby to take the job back")
    took = time.monotonic() - killed
    print(f"takeover: {took:.2f} s from the leader's SIGKILL to the standby holding the job "
          f"(lease TTL {ttl} s)")
    assert took < ttl + 10, standby.output()
    assert "standby: 127.0.0.1:" in standby.output()
    assert running_pids(standby.status(job_id)) == pids
    final = standby.ended(job_id)
    assert final["state"] == "SUCCEEDED", (final, standby.output())
    assert final.get("resets", 0) == 0, standby.output()
    assert read_result(tmp_path / "result.json")["samples_per_epoch"] == [SAMPLES] * 30
    for pid in pids:
        wait_pid_gone(pid)
