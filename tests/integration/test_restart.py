"""Restarting horovodd with the same --state-dir: jobs that ended are still
listed with their events; a job that was running is shown with what became of
it (SIGTERM with shutdown.stop_jobs: ended with the daemon's reason; SIGKILL:
its workers ran on under their shims and the restarted daemon takes it back;
its shims gone too: recorded FAILED, saying its workers were lost), never
silently lost. (tests/integration/test_daemon_restart.py trains through
restarts.)

Real processes: horovodd on a free loopback port, horovodrun to submit,
horovodctl --output json to read back what an operator would see."""

import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from harness import (BUILD, ELASTIC_TRAIN, EVENT_DEADLINE, HOROVODRUN, _pid_alive, kill_shims,
                     shim_pids, wait_pid_gone)

HOROVODD = BUILD / "bin" / "horovodd"
HOROVODCTL = BUILD / "bin" / "horovodctl"
CLI_DEADLINE = 60


class Daemon:
    """One horovodd process; its output is collected so a failure can show it."""

    def __init__(self, state_dir, listen="127.0.0.1:0", config=None):
        # The admin token the daemon keeps in its state dir (the same across restarts).
        self.token_file = state_dir / "admin.token"
        for binary in (HOROVODD, HOROVODCTL):
            assert binary.exists(), f"build first: missing {binary}"
        self.lines = []
        self._cond = threading.Condition()
        extra = ["--config", str(config)] if config else []
        self.proc = subprocess.Popen(
            [str(HOROVODD), "--listen", listen, "--metrics-listen", "127.0.0.1:0",
             "--state-dir", str(state_dir), *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        self.address = self._wait_for_address()

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

    def _wait_for_address(self):
        prefix = "horovodd listening on "
        deadline = time.monotonic() + EVENT_DEADLINE
        with self._cond:
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line[len(prefix):].strip()
                if self.proc.poll() is not None:
                    raise AssertionError(f"horovodd exited ({self.proc.returncode}) before "
                                         "listening:\n" + "\n".join(self.lines))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("horovodd did not start listening:\n"
                                         + "\n".join(self.lines))
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
        return subprocess.run([str(HOROVODCTL), *self.client_args(), *map(str, args)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=CLI_DEADLINE)

    def ctl_json(self, *args):
        result = self.ctl(*args, "--output", "json")
        assert result.returncode == 0, (
            f"horovodctl {' '.join(map(str, args))} failed ({result.returncode}): "
            f"{result.stderr}\n{self.output()}")
        return json.loads(result.stdout)

    def jobs(self):
        return {job["job_id"]: job for job in self.ctl_json("list").get("jobs", [])}

    def watch(self, job_id):
        """The non-output events of the job (INFO included), until its end."""
        result = self.ctl("watch", job_id, "--info", "--output", "json")
        events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        return result.returncode, events

    def submit_detached(self, *command):
        result = subprocess.run(
            [str(HOROVODRUN), *self.client_args(), "--detach", *map(str, command)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLI_DEADLINE)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()


@pytest.fixture
def daemons(tmp_path):
    """Starts horovodd processes; kills whatever is left at the end, by PID
    (the daemons, then the shims their jobs' workers run under)."""
    started = []

    def start(state_dir, **kwargs):
        daemon = Daemon(state_dir, **kwargs)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.cleanup()
    kill_shims(tmp_path)


def free_port():
    """A loopback port free now: a restarted daemon must listen where its
    jobs' workers dial."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def worker_pids():
    """Worker pids a test saw; any still alive at the end are killed."""
    pids = []
    yield pids
    for pid in pids:
        if _pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def wait_for(predicate, what, timeout=EVENT_DEADLINE):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def running_worker_pids(daemon, job_id, count):
    """Waits until `count` workers of the job have been started; their pids."""
    def started():
        pids = [w["pid"] for w in daemon.ctl_json("status", job_id).get("workers", [])
                if w.get("pid", 0) > 0]
        return pids if len(pids) == count else None
    return wait_for(started, f"{count} workers of {job_id} to start")


def kinds(events):
    return [e.get("kind") for e in events]


def test_finished_job_is_listed_with_its_events_after_sigterm_restart(
        daemons, horovodrun, tmp_path):
    state_dir = tmp_path / "state"
    daemon = daemons(state_dir)
    run = horovodrun(*daemon.client_args(), "-np", 2, "-H", "localhost:2",
                     ELASTIC_TRAIN, "--epochs", 1)
    assert run.wait() == 0, run.output()
    (job_id,) = daemon.jobs()
    before = daemon.ctl_json("status", job_id)
    assert (before["state"], before["generation"], before["size"]) == ("SUCCEEDED", 1, 2)
    rc, events_before = daemon.watch(job_id)
    assert rc == 0

    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    daemon = daemons(state_dir)

    jobs = daemon.jobs()
    assert list(jobs) == [job_id], daemon.output()
    after = daemon.ctl_json("status", job_id)
    for key in ("state", "reason", "generation", "size", "min_np", "max_np", "workers",
                "reset_history", "last_commit"):
        assert after.get(key) == before.get(key), key
    assert after["spec"]["argv"] == before["spec"]["argv"]
    # Its workers and hosts as it ended, as the operator saw them before the restart.
    assert len(after["workers"]) == 2
    assert {w["state"] for w in after["workers"]} == {"WORKER_SUCCEEDED"}
    assert [h["host"] for h in after["hosts"]] == [h["host"] for h in before["hosts"]]
    # The same events, ending with the job's end, and `watch` says it succeeded.
    rc, events_after = daemon.watch(job_id)
    assert rc == 0
    assert [(e["seq"], e["kind"], e.get("message")) for e in events_after] == \
        [(e["seq"], e["kind"], e.get("message")) for e in events_before]
    assert kinds(events_after)[-1] == "JOB_ENDED"
    assert "MEMBERSHIP" in kinds(events_after)
    # Job ids are never reused: the next job comes after the recorded one.
    assert (job_id, daemon.submit_detached("-np", 1, "-H", "localhost:1", "/bin/true")) == \
        ("job-1", "job-2")


def test_running_job_ended_by_sigterm_keeps_the_daemons_reason(
        daemons, worker_pids, tmp_path):
    state_dir = tmp_path / "state"
    config = tmp_path / "stop_jobs.yaml"
    config.write_text("shutdown:\n  stop_jobs: true\n")
    daemon = daemons(state_dir, config=config)
    job_id = daemon.submit_detached("-np", 2, "-H", "localhost:2", "sleep", 600)
    worker_pids.extend(running_worker_pids(daemon, job_id, 2))

    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    for pid in worker_pids:
        wait_pid_gone(pid)
    daemon = daemons(state_dir)

    job = daemon.jobs()[job_id]
    assert job["state"] == "CANCELLED", job
    assert "SIGTERM" in job["reason"], job
    rc, events = daemon.watch(job_id)
    assert rc == 1
    assert events[-1]["kind"] == "JOB_ENDED" and events[-1]["message"] == job["reason"]


def test_running_job_outlives_a_sigkilled_daemon_and_is_taken_back(
        daemons, worker_pids, tmp_path):
    state_dir = tmp_path / "state"
    listen = f"127.0.0.1:{free_port()}"
    daemon = daemons(state_dir, listen=listen)
    job_id = daemon.submit_detached("-np", 2, "-H", "localhost:2", "sleep", 600)
    worker_pids.extend(running_worker_pids(daemon, job_id, 2))
    before = daemon.ctl_json("status", job_id)

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    # The workers are the shim's children, not the daemon's: they run on.
    assert all(_pid_alive(pid) for pid in worker_pids)
    daemon = daemons(state_dir, listen=listen)

    status = daemon.ctl_json("status", job_id)
    assert status["state"] == before["state"], status  # a plain command never forms a ring
    assert sorted(w["pid"] for w in status["workers"]) == sorted(worker_pids)
    # An operator can still end it, and then nothing is left behind.
    cancel = daemon.ctl("cancel", job_id, "--wait")
    assert cancel.returncode == 0, cancel
    for pid in worker_pids:
        wait_pid_gone(pid)
    assert daemon.jobs()[job_id]["state"] == "CANCELLED"
    wait_for(lambda: not shim_pids(state_dir), "the job's shim to end")


def test_running_job_is_recorded_failed_when_its_shims_died_with_the_daemon(
        daemons, worker_pids, tmp_path):
    state_dir = tmp_path / "state"
    daemon = daemons(state_dir)
    job_id = daemon.submit_detached("-np", 2, "-H", "localhost:2", "sleep", 600)
    worker_pids.extend(running_worker_pids(daemon, job_id, 2))
    assert all(_pid_alive(pid) for pid in worker_pids)

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    kill_shims(state_dir)
    # The workers die with their shim (its parent-death signal): nothing is left.
    for pid in worker_pids:
        wait_pid_gone(pid)
    daemon = daemons(state_dir)

    # A fixed-size job cannot go on without them: FAILED, saying why.
    job = wait_for(lambda: (daemon.jobs()[job_id] if daemon.jobs()[job_id]["state"] == "FAILED"
                            else None), f"{job_id} to be recorded FAILED")
    assert "its shim was not found after horovodd restarted" in job["reason"], job
    rc, events = daemon.watch(job_id)
    assert rc == 1
    assert events[-1]["kind"] == "JOB_ENDED"
    assert events[-1]["state"] == "FAILED" and events[-1]["message"] == job["reason"]
    # An ended job cannot be cancelled; the restarted daemon says so and changes nothing.
    cancel = daemon.ctl("cancel", job_id)
    assert cancel.returncode == 0 and "had already ended: FAILED" in cancel.stdout, cancel
    assert daemon.jobs()[job_id]["reason"] == job["reason"]
