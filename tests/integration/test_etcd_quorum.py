"""horovodd on a replicated store (--store etcd://a,b,c; issue 36) through
etcd's faults, with a real three-member etcd on loopback ports: losing one
member changes nothing; losing the quorum (two of three) leaves the running
job training, its steps advancing, while the daemon refuses a submit and a
drain with an error naming etcd, and once the quorum is back the records
written meanwhile reach etcd (a new daemon reads the job SUCCEEDED). A
worker killed once the leader has gone a lease TTL without renewing (its
decisions held: it cannot tell a lost quorum from a partition behind which a
standby leads) resets nothing until the quorum is back; then the job resets
and finishes.

Every process (etcd members, horovodd, shims) is ended by PID."""

import os
import signal
import subprocess

import pytest

from etcd_cluster import EtcdCluster
from harness import assert_succeeded
from harness import (CLI_DEADLINE, HOROVODRUN, HostsFile, daemons, read_result,  # noqa: F401
                     submit_elastic_train, wait_for)

SAMPLES = 1024


@pytest.fixture
def etcd(tmp_path):
    cluster = EtcdCluster(tmp_path)
    yield cluster
    cluster.cleanup()


def etcd_config(tmp_path, etcd):
    config = tmp_path / "horovodd.yaml"
    config.write_text(f"store: {etcd.url}\n")
    return config


def check_result(tmp_path, epochs):
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == epochs
    assert result["samples_per_epoch"] == [SAMPLES] * epochs


def test_losing_one_etcd_member_of_three_changes_nothing(daemons, etcd, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    daemon = daemons.start(config=etcd_config(tmp_path, etcd))
    job_id = submit_elastic_train(daemon, tmp_path, epochs=20, delay_ms=10, samples=SAMPLES)
    daemon.training(job_id, 2)
    etcd.kill(0)
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) == 0, final
    check_result(tmp_path, 20)
    assert "etcd store unavailable" not in daemon.output()


def test_without_etcd_quorum_jobs_train_on_and_new_work_is_refused(daemons, etcd, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    config = etcd_config(tmp_path, etcd)
    daemon = daemons.start(config=config)
    job_id = submit_elastic_train(daemon, tmp_path, epochs=30, delay_ms=10, samples=SAMPLES)
    before = daemon.training(job_id, 2)

    etcd.kill(1)
    etcd.kill(2)
    # A new job is refused, naming etcd (after at most the store's call deadline).
    refused = subprocess.run(
        [str(HOROVODRUN), *daemon.client_args(), "--detach", "-np", "1", "true"],
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=CLI_DEADLINE)
    assert refused.returncode == 1, refused.stderr
    assert "etcd store unavailable (quorum lost?): etcd " in refused.stderr, refused.stderr
    assert "workers keep training" in refused.stderr
    # So is a membership change.
    drain = daemon.ctl("drain", "localhost")
    assert drain.returncode == 1
    assert "etcd store unavailable" in drain.stderr, drain.stderr
    # The job trains on: its commits advance without the store.
    commit = daemon.status(job_id).get("last_commit", 0)
    assert commit >= before["last_commit"]
    wait_for(lambda: daemon.status(job_id).get("last_commit", 0) > commit,
             "the job's commits to advance without etcd's quorum")
    assert daemon.status(job_id)["state"] == "RUNNING"

    etcd.restart(1)
    etcd.restart(2)
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) == 0, final
    check_result(tmp_path, 30)
    daemon.wait_for_output("the queued records are written", "the journal to catch up")
    # What etcd holds now: a new daemon on the same store reads the job as it ended.
    assert daemon.stop(15) == 0, daemon.output()
    again = daemons.start(config=config)
    assert again.status(job_id)["state"] == "SUCCEEDED"
    assert [j for j in again.jobs()] == [job_id]


def test_a_worker_lost_without_etcd_quorum_is_acted_on_once_the_quorum_is_back(
        daemons, etcd, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    daemon = daemons.start(config=etcd_config(tmp_path, etcd))
    job_id = submit_elastic_train(daemon, tmp_path, epochs=40, delay_ms=50, min_np=1,
                                  samples=SAMPLES)
    status = daemon.training(job_id, 2)
    generation = status["generation"]

    etcd.kill(1)
    etcd.kill(2)
    # A lease TTL (5 s) without renewal: the job holds its decisions.
    daemon.wait_for_output(
        f"{job_id}: decisions held: cannot renew the leader's etcd lease for ",
        "the job to hold its decisions")
    victim = next(w["pid"] for w in daemon.status(job_id)["workers"]
                  if w.get("state") == "WORKER_RUNNING" and w.get("rank") == 1)
    os.kill(victim, signal.SIGKILL)
    # Its exit is seen and held (one pass of the job's loop): nothing acted on, no reset, no
    # launch, no generation planned.
    daemon.wait_for_output(f"pid {victim}) killed by signal 9 (Killed); acted on when decisions "
                           "resume", "the worker's exit to be held")
    status = daemon.status(job_id)
    assert status["state"] == "RUNNING", status
    assert status["generation"] == generation, status
    assert status.get("resets", 0) == 0, status
    output = daemon.output()
    assert f"generation {generation + 1} planned" not in output, output

    etcd.restart(1)
    etcd.restart(2)
    daemon.wait_for_output(f"{job_id}: decisions resume: the leader's etcd lease is renewed",
                           "the job to decide again")
    daemon.wait_for_output(f"generation {generation + 1} planned", "the reset")
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) >= 1, final
    check_result(tmp_path, 40)
