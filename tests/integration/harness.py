"""Runs horovodrun (and its workers) as real processes on loopback, watches
their output, and cleans up every process it started, by PID.

Tests wait for conditions (a line of output, a process exit) with generous
deadlines instead of sleeping: the machines are small and often loaded."""

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

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

    def __init__(self, args, cwd, env=None):
        self.args = [str(HOROVODRUN)] + [str(a) for a in args]
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
