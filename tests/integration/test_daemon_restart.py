"""Running jobs outlive horovodd (issue 20): a standalone daemon's elastic job
trains on while the daemon is SIGKILLed or SIGTERMed, and the daemon started
again on the same state dir and address takes it back: same workers, same
generation, no reset, every epoch's samples exactly once. What changed while
it was away is handled on its return (a worker killed meanwhile: the job
resets around it, and the output written during the outage reaches
`horovodctl logs`). Workers left alone past their grace period end, and the
job is recorded FAILED saying so. With shutdown.stop_jobs, SIGTERM ends the
jobs (CANCELLED) and nothing is left running.

Real processes on loopback: horovodd on a fixed free port (its workers dial
that address), horovodrun --detach to submit, horovodctl --output json to
read what an operator would see; every process is ended by PID at the end."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from harness import (BUILD, DISCOVER_HOSTS, ELASTIC_TRAIN, EVENT_DEADLINE, HOROVODRUN, HostsFile,
                     JOB_DEADLINE, _pid_alive, kill_shims, read_result, shim_pids, wait_pid_gone)

HOROVODD = BUILD / "bin" / "horovodd"
HOROVODCTL = BUILD / "bin" / "horovodctl"
CLI_DEADLINE = 60
SAMPLES = 2048


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """One horovodd on `listen`; stdout and stderr collected for failures."""

    def __init__(self, state_dir, listen, cwd, env=None, config=None):
        self.token_file = state_dir / "admin.token"
        self.address = listen
        for binary in (HOROVODD, HOROVODCTL, BUILD / "bin" / "horovodd-shim"):
            assert binary.exists(), f"build first: missing {binary}"
        self.lines = []
        self._cond = threading.Condition()
        args = [str(HOROVODD), "--listen", listen, "--metrics-listen", "", "--state-dir",
                str(state_dir)]
        if config:
            args += ["--config", str(config)]
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for_output("horovodd listening on ", "the daemon to listen")

    def _read(self):
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def output(self):
        with self._cond:
            return "\n".join(self.lines)

    def wait_for_output(self, text, what):
        deadline = time.monotonic() + EVENT_DEADLINE
        with self._cond:
            while not any(text in line for line in self.lines):
                if self.proc.poll() is not None:
                    raise AssertionError(f"horovodd exited ({self.proc.returncode}) before "
                                         f"{what}:\n" + "\n".join(self.lines))
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(self.lines))
                self._cond.wait(0.5)

    def stop(self, sig):
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

    def status(self, job_id):
        result = self.ctl("status", job_id, "--output", "json")
        assert result.returncode == 0, f"{result.stderr}\n{self.output()}"
        return json.loads(result.stdout)

    def logs(self, job_id, rank):
        result = self.ctl("logs", job_id, rank, "-n", 10000)
        assert result.returncode == 0, f"{result.stderr}\n{self.output()}"
        return result.stdout.splitlines()


@pytest.fixture
def cluster(tmp_path):
    """start(**kwargs) -> Daemon on one fixed address and state dir, again and
    again; at the end every daemon, shim and worker left is killed by PID."""
    listen = f"127.0.0.1:{free_port()}"
    state_dir = tmp_path / "state"
    started = []

    def start(**kwargs):
        daemon = Daemon(state_dir, listen, tmp_path,
                        env={"HOSTS_FILE": str(tmp_path / "hosts.txt")}, **kwargs)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.cleanup()
    kill_shims(tmp_path)


def wait_for(predicate, what, timeout=EVENT_DEADLINE):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def submit(daemon, tmp_path, epochs, delay_ms, np=2, min_np=2, max_np=2, env=()):
    extra = []
    for item in env:
        extra += ["--env", item]
    result = subprocess.run(
        [str(HOROVODRUN), *daemon.client_args(), "--detach", "-np", str(np), "--min-np",
         str(min_np), "--max-np", str(max_np), "--host-discovery-script", str(DISCOVER_HOSTS),
         "--discovery-interval", "0.2", "--blacklist-cooldown-range", "1", "2", *extra,
         str(ELASTIC_TRAIN), "--epochs", str(epochs), "--samples", str(SAMPLES),
         "--step-delay-ms", str(delay_ms), "--output", str(tmp_path / "result.json")],
        cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=CLI_DEADLINE)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def training(daemon, job_id, size):
    """Waits until `size` workers train and have committed; the status."""
    def ready():
        status = daemon.status(job_id)
        live = [w for w in status.get("workers", []) if w.get("state") == "WORKER_RUNNING"]
        if status.get("size") == size and len(live) == size and status.get("last_commit", 0) > 0:
            return status
        return None
    return wait_for(ready, f"{job_id} to train with {size} workers")


def running_pids(status):
    return sorted(w["pid"] for w in status["workers"] if w.get("state") == "WORKER_RUNNING")


def ended(daemon, job_id, timeout=JOB_DEADLINE):
    """Waits for the job's end; its final status."""
    def final():
        status = daemon.status(job_id)
        return status if status.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED") else None
    return wait_for(final, f"{job_id} to end", timeout)


def test_an_elastic_job_trains_through_a_sigkill_and_a_sigterm_of_its_daemon(cluster, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    daemon = cluster()
    job_id = submit(daemon, tmp_path, epochs=40, delay_ms=15)
    before = training(daemon, job_id, 2)
    pids = running_pids(before)
    generation = before["generation"]

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    # Not the daemon's children: nothing that killed it reaches them.
    time.sleep(4)
    assert all(_pid_alive(pid) for pid in pids), "a worker died with the daemon"

    daemon = cluster()
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    after = daemon.status(job_id)
    # The same workers, generation and hosts, and its commits went on.
    assert after["state"] == "RUNNING", after
    assert running_pids(after) == pids
    assert after["generation"] == generation
    assert [h["host"] for h in after["hosts"]] == ["localhost"]
    # (Commits are recorded at most every 100 ms; the workers hold the rest.)
    assert after.get("last_commit", 0) > 0
    wait_for(lambda: daemon.status(job_id).get("last_commit", 0) > after["last_commit"],
             "commits to reach the restarted daemon")

    # SIGTERM leaves it running too, for the next daemon.
    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    assert all(_pid_alive(pid) for pid in pids), "a worker died with the daemon"
    daemon = cluster()
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    assert running_pids(daemon.status(job_id)) == pids

    final = ended(daemon, job_id)
    assert final["state"] == "SUCCEEDED", (final, daemon.output())
    assert final.get("resets", 0) == 0, daemon.output()
    assert final["generation"] == generation
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 40
    assert result["samples_per_epoch"] == [SAMPLES] * 40
    assert result.get("resets", 0) == 0
    for pid in pids:
        wait_pid_gone(pid)
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")


def test_a_worker_killed_while_the_daemon_is_down_is_handled_on_its_return(cluster, tmp_path):
    hosts = HostsFile(tmp_path, "localhost:2")
    daemon = cluster()
    job_id = submit(daemon, tmp_path, epochs=30, delay_ms=15, min_np=1)
    status = training(daemon, job_id, 2)
    rank1 = next(w["pid"] for w in status["workers"] if w.get("rank") == 1)
    epochs_seen = [int(m.group(1)) for m in
                   (re.search(r"epoch (\d+)/30 loss \S+ size 2", l) for l in daemon.logs(job_id, 0))
                   if m]
    newest_seen = max(epochs_seen, default=0)

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    # Rank 0 prints an epoch line while nobody reads it (the shim keeps it).
    log = next((tmp_path / "state" / "shims").glob(f"{job_id}.log"))
    time.sleep(3)
    os.kill(rank1, signal.SIGKILL)
    wait_pid_gone(rank1)
    # And one slot is gone by the time the daemon is back: the job goes on at size 1.
    hosts.write("localhost:1")

    daemon = cluster()
    final = ended(daemon, job_id)
    assert final["state"] == "SUCCEEDED", (final, daemon.output())
    assert final.get("resets", 0) >= 1, final
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 30
    assert result["samples_per_epoch"] == [SAMPLES] * 30
    assert result["final_size"] == 1
    # Size-2 epochs after the last one seen: written during the outage only.
    outage = [int(m.group(1)) for m in
              (re.search(r"epoch (\d+)/30 loss \S+ size 2", l) for l in daemon.logs(job_id, 0))
              if m and int(m.group(1)) > newest_seen]
    assert outage, f"no output of the outage reached the logs (log {log})"


def test_workers_left_alone_past_their_grace_end_and_the_job_fails_saying_so(cluster, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    # The workers' grace period, short for the test (worker.daemon_grace).
    daemon = cluster()
    job_id = submit(daemon, tmp_path, epochs=1000, delay_ms=20,
                    env=["HOROVODD_DAEMON_GRACE_S=3"])
    pids = running_pids(training(daemon, job_id, 2))

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    for pid in pids:
        wait_pid_gone(pid)  # they end by themselves, after 3 s without a daemon

    daemon = cluster()
    final = ended(daemon, job_id)
    assert final["state"] == "FAILED", final
    assert "longer than the workers' grace period" in final["reason"], final
    lost = [l for l in daemon.logs(job_id, 0) if "lost the daemon" in l]
    assert lost, "the worker's own message did not reach the logs"
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")


def test_stop_jobs_makes_sigterm_end_the_jobs(cluster, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    config = tmp_path / "horovodd.yaml"
    config.write_text("shutdown:\n  stop_jobs: true\n")
    daemon = cluster(config=config)
    job_id = submit(daemon, tmp_path, epochs=1000, delay_ms=20)
    pids = running_pids(training(daemon, job_id, 2))

    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    for pid in pids:
        wait_pid_gone(pid)
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")

    daemon = cluster(config=config)
    status = daemon.status(job_id)
    assert status["state"] == "CANCELLED", status
    assert "SIGTERM" in status["reason"], status
