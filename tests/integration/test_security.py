"""Credentials and TLS against a real horovodd on loopback: each test tries to
break a rule and checks the refusal a user would see (exit code and message).
Job A's worker token on job B is checked in-process, over real gRPC, in
tests/unit/test_auth_server.cc (Debian has no Python gRPC to forge calls with).
Test certificates come from the `certs` fixture (conftest.py)."""

import os
import re
import stat
import subprocess
import time
import urllib.request

import pytest

from harness import BUILD, ELASTIC_TRAIN, EVENT_DEADLINE

HOROVODD = BUILD / "bin" / "horovodd"
HOROVODCTL = BUILD / "bin" / "horovodctl"
CLI_DEADLINE = 60
CREDENTIAL_VARIABLES = ("HOROVODD_TOKEN", "HOROVODD_TOKEN_FILE", "HOROVODD_TLS",
                        "HOROVODD_TLS_CA", "HOROVODD_TLS_CERT", "HOROVODD_TLS_KEY")


def clean_env(**extra):
    """This environment without any credential a developer may have set."""
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_VARIABLES}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def ctl(address, *args, env=None):
    return subprocess.run([str(HOROVODCTL), "--daemon", address, *map(str, args)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CLI_DEADLINE, env=env or clean_env())


def start_refused(tmp_path, *args):
    """Runs a horovodd that must refuse to start; returns (exit code, output)."""
    result = subprocess.run(
        [str(HOROVODD), "--state-dir", str(tmp_path / "refused-state"), "--metrics-listen", "",
         *map(str, args)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=EVENT_DEADLINE,
        env=clean_env())
    return result.returncode, result.stdout + result.stderr


def private_file(path, text, mode=0o600):
    path.write_text(text)
    path.chmod(mode)
    return path


def test_generated_admin_token_is_private_and_never_logged(horovodd):
    daemon = horovodd()
    token_file = daemon.token_file
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) == 64
    assert f"admin token in {token_file}" in daemon.log()

    # No token at all, then a wrong one.
    missing = ctl(daemon.address, "list")
    assert missing.returncode == 1, missing.stderr
    assert "the daemon requires a token: pass --token-file" in missing.stderr
    wrong = ctl(daemon.address, "list", env=clean_env(HOROVODD_TOKEN="0" * 64))
    assert wrong.returncode == 1, wrong.stderr
    assert "the daemon does not know this token" in wrong.stderr
    # Each way of giving the right one.
    for env in (clean_env(HOROVODD_TOKEN=token), clean_env(HOROVODD_TOKEN_FILE=token_file)):
        assert ctl(daemon.address, "list", env=env).stdout == "No jobs.\n"
    assert ctl(daemon.address, "--token-file", token_file, "list").returncode == 0

    log = daemon.log()
    assert "refused ListJobs from ipv4:127.0.0.1:" in log
    assert "missing_token" in log and "wrong_token" in log
    assert token not in log


def test_a_restarted_daemon_reuses_its_token(horovodd, tmp_path):
    state = tmp_path / "kept-state"
    first = horovodd(state_dir=state)
    token = first.token_file.read_text()
    assert first.stop() == 0
    second = horovodd(state_dir=state)
    assert second.token_file.read_text() == token
    assert ctl(second.address, "--token-file", second.token_file, "list").returncode == 0


def test_viewer_token_reads_but_cannot_cancel_or_drain(horovodd, horovodrun, tmp_path):
    viewer = private_file(tmp_path / "viewer.token", "viewer-secret\n")
    daemon = horovodd("--viewer-token-file", viewer)
    submit = horovodrun(*daemon.client_args(), "--detach", "-np", 1, "-H", "localhost:1",
                        "/bin/sleep", 300)
    assert submit.wait() == 0, submit.output()
    job_id = submit.lines[-1].strip()

    as_viewer = ["--token-file", viewer]
    assert job_id in ctl(daemon.address, *as_viewer, "list").stdout
    for args in (["cancel", job_id], ["drain", "localhost"], ["undrain", "localhost"]):
        refused = ctl(daemon.address, *as_viewer, *args)
        assert refused.returncode == 1, args
        assert "refused the request: the viewer token may only read" in refused.stderr, args
    # A job submitted with the viewer token is refused the same way.
    run = horovodrun("--daemon", daemon.address, "--token-file", viewer, "-np", 1,
                     "-H", "localhost:1", "/bin/true")
    assert run.wait() == 1
    assert "SubmitJob needs the admin token" in run.output()

    status = ctl(daemon.address, *as_viewer, "status", job_id)
    assert "RUNNING" in status.stdout or "PENDING" in status.stdout, status.stdout
    cancelled = ctl(daemon.address, "--token-file", daemon.token_file, "cancel", job_id, "--wait")
    assert cancelled.returncode == 0, cancelled.stderr


def test_read_only_calls_can_be_opened_on_loopback(horovodd):
    daemon = horovodd("--open-read-only", "loopback")
    assert ctl(daemon.address, "list").stdout == "No jobs.\n"
    refused = ctl(daemon.address, "drain", "localhost")
    assert refused.returncode == 1
    assert "the daemon requires a token" in refused.stderr


def test_token_file_readable_by_others_is_refused_at_start(tmp_path):
    token_file = private_file(tmp_path / "admin.token", "s3cret\n", mode=0o644)
    code, output = start_refused(tmp_path, "--listen", "127.0.0.1:0",
                                 "--admin-token-file", token_file)
    assert code == 1, output
    assert f"token file {token_file} is readable or writable by group or others " \
           "(mode 0644)" in output
    assert "s3cret" not in output


class OwnDaemon:
    """A horovodd started here, for flags conftest's daemon fixes (--listen,
    --metrics-listen); stopped by PID."""

    def __init__(self, tmp_path, name, *args):
        self.log_path = tmp_path / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(HOROVODD), "--state-dir", str(tmp_path / f"{name}-state"),
                 *map(str, args)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=clean_env())
        deadline = time.monotonic() + EVENT_DEADLINE
        while "serving on" not in self.log():
            assert self.proc.poll() is None, self.log()
            assert time.monotonic() < deadline, self.log()
            time.sleep(0.05)
        self.address = re.search(r"horovodd listening on (\S+)", self.log()).group(1)
        metrics = re.search(r"metrics on http://(\S+)/metrics", self.log())
        self.metrics = metrics.group(1) if metrics else None

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(EVENT_DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


@pytest.fixture
def own_daemon(tmp_path):
    started = []

    def start(*args):
        daemon = OwnDaemon(tmp_path, f"horovodd-{len(started) + 1}", *args)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


def test_listening_beyond_loopback_without_tls_is_refused(tmp_path, own_daemon):
    code, output = start_refused(tmp_path, "--listen", "0.0.0.0:0")
    assert code == 1, output
    assert "refusing to listen on '0.0.0.0' without TLS" in output
    assert "tls.allow_insecure" in output
    # Allowed when asked for, with a warning at start.
    daemon = own_daemon("--listen", "0.0.0.0:0", "--tls-allow-insecure", "--metrics-listen", "")
    assert "without TLS (tls.allow_insecure)" in daemon.log()


def test_refusals_are_counted_by_reason(own_daemon):
    daemon = own_daemon("--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
    assert ctl(daemon.address, "list").returncode == 1
    assert ctl(daemon.address, "cancel", "job-1", env=clean_env(HOROVODD_TOKEN="x")).returncode == 1
    with urllib.request.urlopen(f"http://{daemon.metrics}/metrics",
                                timeout=EVENT_DEADLINE) as reply:
        page = reply.read().decode()
    assert 'horovodd_auth_failures_total{reason="missing_token"} 1' in page
    assert 'horovodd_auth_failures_total{reason="wrong_token"} 1' in page


def mtls_args(certs):
    return ["--tls-cert-file", certs / "server.pem", "--tls-key-file", certs / "server.key",
            "--tls-client-ca-file", certs / "ca.pem",
            "--tls-worker-cert-file", certs / "client.pem",
            "--tls-worker-key-file", certs / "client.key"]


def test_mutual_tls_refuses_plaintext_and_certificateless_clients(horovodd, certs):
    daemon = horovodd(*mtls_args(certs))
    token = ["--token-file", daemon.token_file]

    plaintext = ctl(daemon.address, *token, "--timeout", 5, "list")
    assert plaintext.returncode == 1
    assert f"cannot reach horovodd at {daemon.address}" in plaintext.stderr

    no_client_cert = ctl(daemon.address, *token, "--tls-ca", certs / "ca.pem",
                         "--timeout", 5, "list")
    assert no_client_cert.returncode == 1
    assert f"cannot reach horovodd at {daemon.address}" in no_client_cert.stderr

    client = ["--tls-ca", certs / "ca.pem", "--tls-cert", certs / "client.pem",
              "--tls-key", certs / "client.key"]
    ok = ctl(daemon.address, *token, *client, "list")
    assert (ok.returncode, ok.stdout) == (0, "No jobs.\n"), ok.stderr
    # The certificate does not replace the token.
    assert "the daemon requires a token" in ctl(daemon.address, *client, "list").stderr
    # Through the environment as well.
    env = clean_env(HOROVODD_TLS_CA=certs / "ca.pem", HOROVODD_TLS_CERT=certs / "client.pem",
                    HOROVODD_TLS_KEY=certs / "client.key", HOROVODD_TOKEN_FILE=daemon.token_file)
    assert ctl(daemon.address, "list", env=env).returncode == 0


def test_an_mtls_job_runs_end_to_end(horovodd, horovodrun, certs, tmp_path):
    daemon = horovodd(*mtls_args(certs))
    result = tmp_path / "result.json"
    run = horovodrun(*daemon.client_args(), "--tls-ca", certs / "ca.pem",
                     "--tls-cert", certs / "client.pem", "--tls-key", certs / "client.key",
                     "-np", 2, "-H", "localhost:2", ELASTIC_TRAIN, "--epochs", 1,
                     "--samples", 512, "--output", result,
                     env=clean_env())
    assert run.wait() == 0, run.output() + "\n" + daemon.log()
    assert run.workers(1).keys() == {0, 1}
    assert result.exists()
    # The workers' token never shows in what the daemon logged.
    assert "HOROVODD_WORKER_TOKEN=" not in daemon.log()
