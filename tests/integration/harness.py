"""Runs horovodrun (and its workers) as real processes on loopback, watches
their output, and cleans up every process it started, by PID.

Tests wait for conditions (a line of output, a process exit) with generous
deadlines instead of sleeping: the machines are small and often loaded."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("HVDD_BUILD_DIR", REPO / "build"))
HOROVODRUN = BUILD / "bin" / "horovodrun"
ELASTIC_TRAIN = BUILD / "examples" / "elastic_train"
DISCOVER_HOSTS = REPO / "examples" / "discover_hosts.sh"

# Deadlines, not expectations: a healthy run takes a fraction of these.
JOB_DEADLINE = 240
EVENT_DEADLINE = 120

WORKER_LINE = re.compile(r"\[(-?\d+)\]<stdout>:rank (\d+)/(\d+) generation (\d+) pid (\d+)")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


class Run:
    """One horovodrun process. Output lines are collected from both streams
    (merged, in arrival order) so tests can wait for them."""

    def __init__(self, args, cwd, env=None, prefix=()):
        """prefix: argv before horovodrun's, one that execs it (`ip netns
        exec NS`), so that the pid stays horovodrun's."""
        self.args = [*prefix, str(HOROVODRUN)] + [str(a) for a in args]
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.lines = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            self.args, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        self._readers = [threading.Thread(target=self._read, args=(s,), daemon=True)
                         for s in (self.proc.stdout, self.proc.stderr)]
        for r in self._readers:
            r.start()

    def _read(self, stream):
        for line in stream:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def output(self):
        with self._cond:
            return "\n".join(self.lines)

    def wait_for(self, predicate, what, timeout=EVENT_DEADLINE):
        """Waits until predicate(lines) is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(self.lines)
                if value:
                    return value
                if self.proc.poll() is not None and not any(r.is_alive() for r in self._readers):
                    raise AssertionError(f"horovodrun exited ({self.proc.returncode}) before {what}:\n"
                                         + "\n".join(self.lines[-60:]))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(self.lines[-60:]))
                self._cond.wait(min(left, 0.5))

    def wait_for_line(self, pattern, what=None, timeout=EVENT_DEADLINE):
        regex = re.compile(pattern)

        def match(lines):
            for line in lines:
                m = regex.search(line)
                if m:
                    return m
            return None
        return self.wait_for(match, what or f"a line matching {pattern!r}", timeout)

    def count(self, pattern):
        regex = re.compile(pattern)
        with self._cond:
            return sum(1 for line in self.lines if regex.search(line))

    def workers(self, generation=None):
        """{rank: pid} from the example's "rank R/S generation G pid P" lines,
        for the newest generation seen (or the one given)."""
        with self._cond:
            seen = [WORKER_LINE.search(l) for l in self.lines]
        seen = [m for m in seen if m]
        if not seen:
            return {}
        gen = generation if generation is not None else max(int(m.group(4)) for m in seen)
        return {int(m.group(2)): int(m.group(5)) for m in seen if int(m.group(4)) == gen}

    def wait_for_size(self, size, timeout=EVENT_DEADLINE):
        """Waits until every rank of a generation of `size` workers reported;
        returns {rank: pid}."""
        def complete(lines):
            gens = {}
            for l in lines:
                m = WORKER_LINE.search(l)
                if m and int(m.group(3)) == size:
                    gens.setdefault(int(m.group(4)), {})[int(m.group(2))] = int(m.group(5))
            for gen in sorted(gens, reverse=True):
                if len(gens[gen]) == size:
                    return gens[gen]
            return None
        return self.wait_for(complete, f"a generation of size {size}", timeout)

    def all_worker_pids(self):
        with self._cond:
            return {int(m.group(5)) for m in (WORKER_LINE.search(l) for l in self.lines) if m}

    def wait(self, timeout=JOB_DEADLINE):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"horovodrun did not finish within {timeout}s:\n" + self.output()[-6000:])
        for r in self._readers:
            r.join(30)
        return self.proc.returncode

    def cleanup(self):
        """Ends horovodrun and every worker it reported, by PID."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)
        for pid in self.all_worker_pids():
            if _pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


class HostsFile:
    """The file examples/discover_hosts.sh prints; replaced atomically."""

    def __init__(self, directory, content):
        self.path = Path(directory) / "hosts.txt"
        self.write(content)

    def write(self, content):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(content if content.endswith("\n") else content + "\n")
        os.replace(tmp, self.path)


def read_result(path):
    with open(path) as f:
        return json.load(f)


def wait_pid_gone(pid, timeout=EVENT_DEADLINE):
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still alive after {timeout}s")
        time.sleep(0.05)


SHIM_PID_LINE = re.compile(r"horovodd-shim: pid (\d+) serving job")


def shim_pids(root):
    """The pids of the horovodd-shim processes still running under any state
    dir below `root` (each writes "pid N serving job J" to
    <state dir>/shims/<job>.log)."""
    pids = set()
    for log in Path(root).rglob("shims/*.log"):
        for match in SHIM_PID_LINE.finditer(log.read_text(errors="replace")):
            pid = int(match.group(1))
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    is_shim = b"horovodd-shim" in f.read()
            except OSError:
                is_shim = False
            if is_shim and _pid_alive(pid):
                pids.add(pid)
    return pids


def kill_shims(root):
    """Ends every shim below `root` by PID (SIGKILL); their workers die with
    them (parent-death signal). A daemon stopped with SIGTERM leaves its jobs
    running under their shims for the next daemon: tests end them here."""
    for pid in shim_pids(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# ---------------------------------------------------------------------------
# A standalone horovodd on a state dir, killed and started again on the same
# address (test_daemon_restart.py, test_restart.py, test_daemon_chaos.py)
# ---------------------------------------------------------------------------

HOROVODD = BUILD / "bin" / "horovodd"
HOROVODCTL = BUILD / "bin" / "horovodctl"
HOROVODD_SHIM = BUILD / "bin" / "horovodd-shim"
CLI_DEADLINE = 60


def free_port():
    """A loopback port free now: a restarted daemon must listen where its
    jobs' workers dial, so a test picks the port once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, what, timeout=EVENT_DEADLINE, interval=0.2):
    """Calls predicate() until it is truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


class Daemon:
    """One horovodd process on `listen`; its output (both streams) is
    collected so a failure can show it. `address` is where it listens (the
    port it was given, or the one it picked for port 0)."""

    LISTENING = "horovodd listening on "

    def __init__(self, state_dir, listen="127.0.0.1:0", cwd=None, env=None, config=None,
                 prefix=(), metrics=False):
        """prefix: argv that execs horovodd elsewhere (`ip netns exec NS`: the
        pid stays horovodd's); its horovodctl and horovodrun run there too."""
        for binary in (HOROVODD, HOROVODCTL, HOROVODD_SHIM):
            assert binary.exists(), f"build first: missing {binary}"
        # The admin token the daemon keeps in its state dir (the same across restarts).
        self.token_file = Path(state_dir) / "admin.token"
        self.lines = []
        self._cond = threading.Condition()
        self.prefix = list(prefix)
        # metrics: serve /metrics on a free loopback port (metrics_text reads it).
        args = [*self.prefix, str(HOROVODD), "--listen", listen, "--metrics-listen",
                "127.0.0.1:0" if metrics else "", "--state-dir", str(state_dir)]
        if config:
            args += ["--config", str(config)]
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        line = self.wait_for_output(self.LISTENING, "the daemon to listen")
        self.address = line[line.index(self.LISTENING) + len(self.LISTENING):].strip()

    METRICS = re.compile(r"horovodd metrics on (http://\S+/metrics)")

    def metrics_text(self):
        """The daemon's /metrics page (started with metrics=True)."""
        match = self.METRICS.search(self.output())
        assert match, "the daemon serves no metrics:\n" + self.output()
        with urllib.request.urlopen(match.group(1), timeout=CLI_DEADLINE) as page:
            return page.read().decode()

    def metric(self, name):
        """The value of the unlabelled metric `name` on /metrics (None if absent)."""
        match = re.search(rf"^{re.escape(name)} (\S+)$", self.metrics_text(), re.MULTILINE)
        return float(match.group(1)) if match else None

    def _read(self):
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def output(self):
        with self._cond:
            return "\n".join(self.lines)

    def wait_to_lead(self, what, timeout=EVENT_DEADLINE):
        """Waits until this daemon leads (an HA pair) and serves as the leader: between its
        "leading:" line and its "serving on" one it starts its leader's server on the port its
        standby's listened on, and a client connecting then is refused."""
        self.wait_for_output("leading:", what, timeout)
        return self.wait_for_output("serving on", f"{what} (serving)", timeout)

    def wait_for_output(self, text, what, timeout=EVENT_DEADLINE):
        """Waits for a line containing `text`; returns it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                line = next((l for l in self.lines if text in l), None)
                if line is not None:
                    return line
                if self.proc.poll() is not None:
                    raise AssertionError(f"horovodd exited ({self.proc.returncode}) before "
                                         f"{what}:\n" + "\n".join(self.lines))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(self.lines))
                self._cond.wait(min(left, 0.5))

    def stop(self, sig):
        """Sends `sig` and returns the exit status."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(EVENT_DEADLINE)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"horovodd did not exit after {sig!r}:\n" + self.output())

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def client_args(self):
        return ["--daemon", self.address, "--token-file", str(self.token_file)]

    def ctl(self, *args):
        return subprocess.run([*self.prefix, str(HOROVODCTL), *self.client_args(),
                               *map(str, args)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=CLI_DEADLINE)

    def ctl_json(self, *args):
        result = self.ctl(*args, "--output", "json")
        assert result.returncode == 0, (
            f"horovodctl {' '.join(map(str, args))} failed ({result.returncode}): "
            f"{result.stderr}\n{self.output()}")
        return json.loads(result.stdout)

    def status(self, job_id):
        return self.ctl_json("status", job_id)

    def jobs(self):
        return {job["job_id"]: job for job in self.ctl_json("list").get("jobs", [])}

    def logs(self, job_id, rank):
        result = self.ctl("logs", job_id, rank, "-n", 10000)
        assert result.returncode == 0, f"{result.stderr}\n{self.output()}"
        return result.stdout.splitlines()

    def watch(self, job_id):
        """The non-output events of the job (INFO included), until its end."""
        result = self.ctl("watch", job_id, "--info", "--output", "json")
        events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        return result.returncode, events

    def submit_detached(self, *command, cwd=None):
        result = subprocess.run(
            [*self.prefix, str(HOROVODRUN), *self.client_args(), "--detach",
             *map(str, command)],
            cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=CLI_DEADLINE)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    # --- a job's progress, as `horovodctl status` shows it

    def training(self, job_id, size):
        """Waits until `size` workers train and have committed; the status."""
        def ready():
            status = self.status(job_id)
            live = [w for w in status.get("workers", []) if w.get("state") == "WORKER_RUNNING"]
            if (status.get("size") == size and len(live) == size
                    and status.get("last_commit", 0) > 0):
                return status
            return None
        return wait_for(ready, f"{job_id} to train with {size} workers")

    def ended(self, job_id, timeout=JOB_DEADLINE):
        """Waits for the job's end; its final status."""
        def final():
            status = self.status(job_id)
            return status if status.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED") else None
        return wait_for(final, f"{job_id} to end", timeout)


def running_pids(status):
    """The pids of a status's running workers, sorted."""
    return sorted(w["pid"] for w in status["workers"] if w.get("state") == "WORKER_RUNNING")


class StandaloneDaemons:
    """Standalone daemons on one state dir (<root>/state) and one fixed
    loopback address, started again and again as an operator restarts one;
    cleanup() ends every daemon, then every shim below `root` (their workers
    go with them), by PID."""

    def __init__(self, root, env=None, metrics=False):
        self.root = Path(root)
        self.state_dir = self.root / "state"
        self.listen = f"127.0.0.1:{free_port()}"
        self.env = env
        self.metrics = metrics
        self.started = []

    def start(self, config=None):
        daemon = Daemon(self.state_dir, self.listen, cwd=self.root, env=self.env, config=config,
                        metrics=self.metrics)
        self.started.append(daemon)
        return daemon

    def restart(self, daemon, sig=signal.SIGKILL, config=None):
        """Stops `daemon` with `sig` (SIGKILL: as a crash; SIGTERM: as
        systemctl stop) and starts the next one on the same state dir and address."""
        expected = -signal.SIGKILL if sig == signal.SIGKILL else 0
        assert daemon.stop(sig) == expected, daemon.output()
        return self.start(config=config)

    def cleanup(self):
        for daemon in self.started:
            daemon.cleanup()
        kill_shims(self.root)


@pytest.fixture
def daemons(tmp_path):
    """StandaloneDaemons under tmp_path; HOSTS_FILE (examples/discover_hosts.sh)
    names <tmp_path>/hosts.txt for the jobs' discovery."""
    pool = StandaloneDaemons(tmp_path, env={"HOSTS_FILE": str(tmp_path / "hosts.txt")})
    yield pool
    pool.cleanup()


def submit_elastic_train(daemon, workdir, epochs, delay_ms, np=2, min_np=2, max_np=2,
                         samples=2048, cooldown=(1, 2), env=(), extra=(), extra_train_args=()):
    """Submits examples/elastic_train, detached, discovering its hosts from
    <workdir>/hosts.txt, a failing host benched for `cooldown` (LO, HI
    seconds); it writes <workdir>/result.json. `extra` goes to horovodrun,
    `extra_train_args` to elastic_train. Its job id."""
    args = []
    for item in env:
        args += ["--env", item]
    return daemon.submit_detached(
        "-np", np, "--min-np", min_np, "--max-np", max_np, "--host-discovery-script",
        DISCOVER_HOSTS, "--discovery-interval", "0.2", "--blacklist-cooldown-range", *cooldown,
        *args, *extra, ELASTIC_TRAIN, "--epochs", epochs, "--samples", samples,
        "--step-delay-ms", delay_ms, "--output", Path(workdir) / "result.json",
        *extra_train_args, cwd=workdir)


def assert_succeeded(daemon, final):
    """The job ended SUCCEEDED; otherwise its reason, and the daemon's whole log
    printed (pytest shows a failed test's output in full, where it cuts a long
    assertion message short)."""
    if final["state"] != "SUCCEEDED":
        print(daemon.output())
    assert final["state"] == "SUCCEEDED", (final["state"], final.get("reason"))
