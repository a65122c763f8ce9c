"""horovodd as a service, as a real process on loopback: it runs with no
config file, serves metrics that count what its jobs did, logs job events
(as JSON lines when asked), speaks systemd's notify protocol, ends running
jobs with a recorded reason on SIGTERM and exits 0, refuses a bad config with
one line and exit code 2; and its systemd unit passes systemd-analyze verify.
(Health checking and reflection are checked in-process, in
tests/unit/test_daemon_server.cc, since Debian has no python gRPC.)"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from harness import (kill_shims, BUILD, DISCOVER_HOSTS, ELASTIC_TRAIN, EVENT_DEADLINE, REPO, HostsFile,
                     wait_pid_gone)

HOROVODD = BUILD / "bin" / "horovodd"
UNIT = REPO / "deploy" / "systemd" / "horovodd.service"


class Daemon:
    """One horovodd process; its stdout and stderr lines are collected
    separately so tests can wait for them."""

    def __init__(self, args, cwd, env=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.args = [str(HOROVODD)] + [str(a) for a in args]
        self.stdout, self.stderr = [], []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(self.args, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._readers = [threading.Thread(target=self._read, args=(s, lines), daemon=True)
                         for s, lines in ((self.proc.stdout, self.stdout),
                                          (self.proc.stderr, self.stderr))]
        for r in self._readers:
            r.start()

    def _read(self, stream, lines):
        for line in stream:
            with self._cond:
                lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def output(self):
        with self._cond:
            return "\n".join(["-- stdout:"] + self.stdout + ["-- stderr:"] + self.stderr)

    def wait_for_line(self, lines, pattern, what, timeout=EVENT_DEADLINE):
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in lines:
                    m = regex.search(line)
                    if m:
                        return m
                if self.proc.poll() is not None and not any(r.is_alive() for r in self._readers):
                    raise AssertionError(f"horovodd exited ({self.proc.returncode}) before "
                                         f"{what}:\n{self.output()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}:\n{self.output()}")
                self._cond.wait(min(left, 0.5))

    def address(self):
        return self.wait_for_line(self.stdout, r"^horovodd listening on (\S+)$",
                                  "the listening address").group(1)

    def client_args(self, token_file):
        """--daemon and --token-file for horovodrun and horovodctl."""
        return ["--daemon", self.address(), "--token-file", str(token_file)]

    def metrics_address(self):
        return self.wait_for_line(self.stdout, r"^horovodd metrics on http://(\S+)/metrics$",
                                  "the metrics address").group(1)

    def wait(self, timeout=EVENT_DEADLINE):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"horovodd did not exit within {timeout}s:\n{self.output()}")
        for r in self._readers:
            r.join(30)
        return self.proc.returncode

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        return self.wait()

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture
def daemon_process(tmp_path):
    """Starts horovodd processes (in tmp_path, reading tmp_path/hosts.txt for
    discovery) with the environment and arguments given, even ones it refuses;
    kills whatever is left at the end, by PID. (conftest's `horovodd` fixture
    merges stdout and stderr and expects a start that works; these tests need
    the streams apart, an environment, and failing starts.)"""
    daemons = []

    def start(*args, env=None):
        full_env = {"HOSTS_FILE": str(tmp_path / "hosts.txt")}
        full_env.update(env or {})
        daemon = Daemon(args, cwd=tmp_path, env=full_env)
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        daemon.cleanup()
    # SIGTERM leaves running jobs to the next daemon, under their shims.
    kill_shims(tmp_path)


def serve_args(tmp_path, *extra):
    return ["--listen", "127.0.0.1:0", "--state-dir", tmp_path / "state",
            "--metrics-listen", "127.0.0.1:0", *extra]


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=EVENT_DEADLINE) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return reply.read().decode()


def sample(page, series):
    """The value of the sample `series` ("name" or "name{labels}") on the page."""
    for line in page.splitlines():
        name, _, value = line.rpartition(" ")
        if name == series:
            return float(value)
    raise AssertionError(f"no sample {series} in:\n{page}")


def wait_for_sample(address, series, value):
    """Scrapes until `series` has `value` (events reach the metrics a moment
    after the workers see their effect); returns that page."""
    deadline = time.monotonic() + EVENT_DEADLINE
    while True:
        page = scrape(address)
        if sample(page, series) == value:
            return page
        if time.monotonic() > deadline:
            raise AssertionError(f"{series} never became {value}:\n{page}")
        time.sleep(0.1)


def elastic_job(daemon, tmp_path, np, min_np, max_np, epochs, delay_ms):
    return [*daemon.client_args(tmp_path / "state" / "admin.token"), "-np", np, "--min-np", min_np, "--max-np", max_np,
            "--host-discovery-script", DISCOVER_HOSTS, "--discovery-interval", "0.2",
            ELASTIC_TRAIN, "--epochs", epochs, "--samples", 2048,
            "--step-delay-ms", delay_ms, "--output", tmp_path / "result.json"]


def test_metrics_count_a_jobs_resets_and_logs_are_json_lines(daemon_process, horovodrun,
                                                             tmp_path):
    hosts = HostsFile(tmp_path, "localhost:2")
    daemon = daemon_process(*serve_args(tmp_path, "--log-format", "json"))
    metrics = daemon.metrics_address()
    assert sample(scrape(metrics), 'horovodd_jobs{state="running"}') == 0

    run = horovodrun(*elastic_job(daemon, tmp_path, 2, 2, 3, epochs=3, delay_ms=25))
    run.wait_for_size(2)
    wait_for_sample(metrics, 'horovodd_jobs{state="running"}', 1)
    wait_for_sample(metrics, "horovodd_workers", 2)
    hosts.write("localhost:3")
    run.wait_for_size(3)
    assert run.wait() == 0, run.output()

    page = wait_for_sample(metrics, 'horovodd_jobs{state="succeeded"}', 1)
    assert sample(page, 'horovodd_jobs{state="running"}') == 0
    assert sample(page, "horovodd_workers") == 0
    rpcs = 'horovodd_rpc_requests_total{method="horovodd.v1.%s"}'
    assert sample(page, rpcs % "JobService/SubmitJob") == 1
    assert sample(page, rpcs % "WorkerService/Attach") >= 3
    assert sample(page, rpcs % "WorkerService/KvSet") >= 5
    resets = sample(page, "horovodd_resets_total")
    assert resets >= 1
    # One latency sample per reset, each counted in the +Inf bucket.
    assert sample(page, "horovodd_reset_latency_seconds_count") == resets
    assert sample(page, 'horovodd_reset_latency_seconds_bucket{le="+Inf"}') == resets
    assert sample(page, "horovodd_reset_latency_seconds_sum") > 0

    # Every log line is a JSON object; job events are there, worker output is not.
    assert daemon.stop() == 0
    records = [json.loads(line) for line in daemon.stderr]
    assert all(set(r) == {"time", "level", "message"} for r in records), daemon.output()
    messages = [r["message"] for r in records]
    resets_logged = [m for m in messages
                     if re.match(r"job-1: generation \d+ ready: size \d+ .*\(reset took", m)]
    assert len(resets_logged) == resets, daemon.output()
    assert any(m.startswith("job-1: ended SUCCEEDED") for m in messages), daemon.output()
    assert not any(re.search(r"epoch \d+/3", m) for m in messages), "worker output was logged"


def test_sigterm_with_stop_jobs_ends_running_jobs_with_a_recorded_reason_and_exits_0(
        daemon_process, horovodrun, tmp_path):
    # shutdown.stop_jobs: without it SIGTERM leaves running jobs to the next
    # daemon (tests/integration/test_daemon_restart.py).
    config = tmp_path / "stop_jobs.yaml"
    config.write_text("shutdown:\n  stop_jobs: true\n")
    HostsFile(tmp_path, "localhost:2")
    daemon = daemon_process(*serve_args(tmp_path, "--config", config))
    run = horovodrun(*elastic_job(daemon, tmp_path, 2, 2, 2, epochs=1000, delay_ms=50))
    workers = run.wait_for_size(2)

    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    # horovodrun streams the end of the job with its reason, and exits as for a cancel.
    assert run.wait() == 130, run.output()
    assert "horovodrun: job CANCELLED: horovodd stopped (SIGTERM)" in run.output()
    for pid in workers.values():
        wait_pid_gone(pid)
    log = "\n".join(daemon.stderr)
    assert "job-1: ended CANCELLED: horovodd stopped (SIGTERM)" in log, daemon.output()

    # The next run on the same state dir has the job on record.
    again = daemon_process(*serve_args(tmp_path, "--config", config))
    again.wait_for_line(again.stderr, r"1 jobs recovered from earlier runs", "the recovery")
    assert sample(scrape(again.metrics_address()), 'horovodd_jobs{state="cancelled"}') == 1
    assert again.stop() == 0


def test_config_file_sets_the_address_and_the_limits(daemon_process, horovodrun, tmp_path):
    config = tmp_path / "horovodd.yaml"
    config.write_text(f"listen: 127.0.0.1:0\nstate_dir: {tmp_path / 'state'}\n"
                      "metrics_listen: ''\nlimits:\n  max_jobs: 1\n")
    daemon = daemon_process("--config", config)
    client = daemon.client_args(tmp_path / "state" / "admin.token")
    first = horovodrun(*client, "--detach", "-np", 1, "-H", "localhost:1",
                       "/bin/sleep", "300")
    assert first.wait() == 0, first.output()
    second = horovodrun(*client, "-np", 1, "-H", "localhost:1", "/bin/true")
    assert second.wait() == 1, second.output()
    assert "at most 1 unfinished jobs at once (limits.max_jobs)" in second.output()
    assert daemon.stop() == 0
    # metrics_listen '' in the file: no metrics endpoint.
    assert not any("metrics on" in line for line in daemon.stdout), daemon.output()


def test_systemd_notify_protocol(daemon_process, tmp_path):
    path = str(tmp_path / "notify.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(path)
    notify.settimeout(EVENT_DEADLINE)
    # A short watchdog, so keep-alives come at once (every 0.25 s).
    daemon = daemon_process(*serve_args(tmp_path),
                      env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "500000"})
    try:
        messages = []

        def receive_until(predicate, what):
            while not any(predicate(m) for m in messages):
                try:
                    messages.append(notify.recv(4096).decode())
                except socket.timeout:
                    raise AssertionError(f"no {what} from horovodd: {messages}\n{daemon.output()}")

        receive_until(lambda m: m.startswith("READY=1"), "READY=1")
        ready = next(m for m in messages if m.startswith("READY=1"))
        assert f"STATUS=serving on {daemon.address()}" in ready
        receive_until(lambda m: messages.count("WATCHDOG=1") >= 2, "two WATCHDOG=1")
        daemon.proc.send_signal(signal.SIGTERM)
        receive_until(lambda m: m.startswith("STOPPING=1"), "STOPPING=1")
        stopping = next(m for m in messages if m.startswith("STOPPING=1"))
        assert "horovodd stopped (SIGTERM)" in stopping
        assert daemon.wait() == 0
    finally:
        notify.close()


@pytest.mark.parametrize("text, named", [
    ("listen: 127.0.0.1:7451\nlisten_port: 80\n", ":2: unknown key 'listen_port'"),
    ("limits:\n  max_jobs: none\n", ":2: limits.max_jobs: 'none' is not a whole number >= 1"),
    ("log_format: xml\n", ":1: log_format: 'xml' is not a log format (text, json)"),
    ("listen: [127.0.0.1\n", ": malformed YAML"),
])
def test_bad_config_file_is_one_line_and_exit_2(daemon_process, tmp_path, text, named):
    config = tmp_path / "horovodd.yaml"
    config.write_text(text)
    daemon = daemon_process("--config", config)
    assert daemon.wait() == 2
    assert daemon.stdout == []
    assert len(daemon.stderr) == 1, daemon.output()
    assert daemon.stderr[0].startswith(f"horovodd: error: {config}")
    assert named in daemon.stderr[0]


@pytest.mark.parametrize("args, named", [
    (["--config", "/nonexistent/horovodd.yaml"],
     "cannot read config file '/nonexistent/horovodd.yaml'"),
    (["--listen", "7451"], "--listen: '7451' is not host:port"),
    (["--log-level", "loud"], "--log-level: 'loud' is not a log level"),
    (["--frobnicate"], "--frobnicate"),
])
def test_bad_flags_are_one_line_and_exit_2(daemon_process, args, named):
    daemon = daemon_process(*args)
    assert daemon.wait() == 2
    assert len(daemon.stderr) == 1, daemon.output()
    assert daemon.stderr[0].startswith("horovodd: error:") and named in daemon.stderr[0]


def test_an_unusable_state_dir_stops_it_with_exit_1(daemon_process, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    daemon = daemon_process("--listen", "127.0.0.1:0", "--metrics-listen", "",
                      "--state-dir", tmp_path / "file" / "state")
    assert daemon.wait() == 1
    assert str(tmp_path / "file" / "state") in daemon.output()


def test_systemd_unit_verifies(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing: scripts/install_deps.sh installs systemd")
    text = UNIT.read_text()
    assert "ExecStart=/usr/local/bin/horovodd --config /etc/horovodd/horovodd.yaml\n" in text
    # verify wants ExecStart's binary to exist; point it at the one just
    # built and keep everything else as shipped.
    unit = tmp_path / "horovodd.service"
    unit.write_text(text.replace("/usr/local/bin/horovodd", str(HOROVODD)))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                            timeout=EVENT_DEADLINE)
    # Settings systemd cannot parse are only warnings ("..., ignoring"): any output fails.
    assert result.returncode == 0 and result.stdout == "" and result.stderr == "", \
        result.stdout + result.stderr
