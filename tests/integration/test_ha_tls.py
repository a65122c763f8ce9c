"""A standby and its leader under mutual TLS (issue 36, docs/ha.md): the
standby serves the clients over TLS on its own address and forwards their
reads to the leader over TLS too (dialing it with tls.worker_ca_file and the
workers' client certificate), with the caller's token; a write sent to it is
refused naming the leader, and horovodctl follows that to the leader.

Two horovodd on one three-member etcd on loopback (ha_cluster.py), each with
the same `tls` section; the test CA and certificates come from the `certs`
fixture (conftest.py). Every daemon, shim, worker and etcd member is ended by PID."""

import json
import os
import subprocess

import pytest

from ha_cluster import HaPair
from harness import BUILD, CLI_DEADLINE, HOROVODCTL, HOROVODRUN, wait_for

PROBE = BUILD / "tests" / "integration" / "submit_probe"


@pytest.fixture
def ha(tmp_path, certs):
    pair = HaPair(tmp_path, lease_ttl=3, tls={
        "cert_file": certs / "server.pem", "key_file": certs / "server.key",
        "client_ca_file": certs / "ca.pem", "worker_ca_file": certs / "ca.pem",
        "worker_cert_file": certs / "client.pem", "worker_key_file": certs / "client.key"})
    yield pair
    pair.cleanup()


def tls_args(certs):
    return ["--tls-ca", certs / "ca.pem", "--tls-cert", certs / "client.pem",
            "--tls-key", certs / "client.key"]


def clean_env():
    """This environment without the client settings a developer's shell may hold."""
    return {k: v for k, v in os.environ.items() if not k.startswith("HOROVODD_")}


def ctl(daemon, certs, *args, token_file=None):
    return subprocess.run(
        [str(HOROVODCTL), "--daemon", daemon.address, "--token-file",
         str(token_file or daemon.token_file), *map(str, tls_args(certs)), *map(str, args)],
        env=clean_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=CLI_DEADLINE)


def ctl_json(daemon, certs, *args):
    result = ctl(daemon, certs, *args, "--output", "json")
    assert result.returncode == 0, f"{result.stderr}\n{daemon.output()}"
    return json.loads(result.stdout)


def test_a_standby_forwards_reads_to_the_leader_over_mutual_tls(ha, certs, tmp_path):
    a = ha.start("a")
    a.wait_to_lead("a to lead")
    b = ha.start("b")
    b.wait_for_output(f"standby: {a.address} leads", "b to stand by")

    run = subprocess.run(
        [str(HOROVODRUN), "--daemon", a.address, "--token-file", str(ha.token),
         *map(str, tls_args(certs)), "--detach", "-np", "1", "-H", "localhost:1",
         "/bin/sh", "-c", "echo hello over tls; exec sleep 600"],
        cwd=tmp_path, env=clean_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=CLI_DEADLINE)
    assert run.returncode == 0, f"{run.stderr}\n{a.output()}"
    job_id = run.stdout.strip()

    # Reads on the standby, over TLS, answered by the leader over TLS.
    assert [job["job_id"] for job in ctl_json(b, certs, "list")["jobs"]] == [job_id]
    status = ctl_json(b, certs, "status", job_id)
    assert status["job_id"] == job_id
    assert status["state"] in ("PENDING", "RUNNING"), status

    def logged():
        result = ctl(b, certs, "logs", job_id, 0)
        return result.returncode == 0 and "hello over tls" in result.stdout
    wait_for(logged, "the worker's output through the standby")

    # The standby passes the caller's token on and adds none of its own.
    wrong = tmp_path / "wrong.token"
    fd = os.open(wrong, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("0" * 64 + "\n")
    refused = ctl(b, certs, "status", job_id, token_file=wrong)
    assert refused.returncode != 0, refused.stdout
    # A client without a certificate cannot reach the standby's own listener.
    no_cert = subprocess.run(
        [str(HOROVODCTL), "--daemon", b.address, "--token-file", str(ha.token), "--tls-ca",
         str(certs / "ca.pem"), "list"],
        env=clean_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=CLI_DEADLINE)
    assert no_cert.returncode != 0, no_cert.stdout
    assert f"cannot reach horovodd at {b.address}" in no_cert.stderr

    # A write sent to the standby alone: refused there, naming the leader...
    assert PROBE.exists(), f"build first: missing {PROBE}"
    env = dict(clean_env(), HOROVODD_TLS_CA=str(certs / "ca.pem"),
               HOROVODD_TLS_CERT=str(certs / "client.pem"),
               HOROVODD_TLS_KEY=str(certs / "client.key"))
    probe = subprocess.run([str(PROBE), b.address, str(ha.token), "0123456789abcdef-tls",
                            "/bin/true"],
                           env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=CLI_DEADLINE)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines() == [
        f"SubmitJob: FAILED_PRECONDITION: this horovodd ({b.address}) is a standby; "
        f"the leader is {a.address}",
        f"leader: {a.address}"], probe.stdout
    # ...and horovodctl, given the standby, follows that to the leader over TLS.
    cancel = ctl(b, certs, "cancel", job_id)
    assert cancel.returncode == 0, f"{cancel.stderr}\n{a.output()}"
    wait_for(lambda: ctl_json(a, certs, "status", job_id)["state"] == "CANCELLED",
             "the job to be cancelled by the leader")
    # A watch through the standby streams the job's events to its end.
    watch = ctl(b, certs, "watch", job_id, "--output", "json")
    events = [json.loads(line) for line in watch.stdout.splitlines() if line.strip()]
    assert events and events[-1]["kind"] == "JOB_ENDED", watch.stdout
    assert events[-1]["state"] == "CANCELLED"
    assert len(ctl_json(b, certs, "list")["jobs"]) == 1
