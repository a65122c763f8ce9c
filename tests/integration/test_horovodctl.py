"""horovodctl and horovodrun --daemon against a real horovodd process (the
`horovodd` fixture in conftest.py): two jobs at once, status fields checked
against what the test did, cancel, draining a host mid-job, worker logs,
watching membership changes live, bad requests, --detach and Ctrl-C."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

from harness import BUILD, ELASTIC_TRAIN, EVENT_DEADLINE, JOB_DEADLINE, HostsFile, wait_pid_gone

HOROVODCTL = BUILD / "bin" / "horovodctl"
CLI_DEADLINE = 60
ENDED_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")
SUBMITTED = r"horovodrun: job (job-\d+) submitted"


def ctl(daemon, *args, env=None):
    """Runs horovodctl against `daemon` (None: no --daemon flag)."""
    assert HOROVODCTL.exists(), f"build first: missing {HOROVODCTL}"
    address = daemon.client_args() if daemon is not None else []
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([str(HOROVODCTL), *address, *[str(a) for a in args]],
                          capture_output=True, text=True, timeout=CLI_DEADLINE, env=full_env)


def ctl_json(daemon, *args):
    result = ctl(daemon, "--output", "json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_status(daemon, job_id, predicate, what, timeout=EVENT_DEADLINE):
    """Polls `horovodctl status` until predicate(status) holds; returns that status."""
    deadline = time.monotonic() + timeout
    while True:
        status = ctl_json(daemon, "status", job_id)
        if predicate(status):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last status:\n"
                                 + json.dumps(status, indent=1)[-6000:])
        time.sleep(0.2)


def members(status):
    """{rank: worker} of the current generation."""
    return {w["rank"]: w for w in status["workers"] if w["rank"] >= 0}


def running_with_size(size):
    return lambda s: (s["state"] == "RUNNING" and s["size"] == size
                      and len(members(s)) == size)


def train(*size_args, epochs=100000, delay_ms=20):
    """horovodrun arguments (after --daemon ADDR) of an elastic_train job that
    runs until it is cancelled, unless `epochs` is small."""
    return [*size_args, ELASTIC_TRAIN, "--epochs", epochs, "--step-delay-ms", delay_ms]


def discovery_script(directory, hosts):
    """A discovery script printing a hosts file by absolute path (the daemon
    runs it in its own directory, not the job's); returns (script, HostsFile)."""
    directory.mkdir(exist_ok=True)
    hosts_file = HostsFile(directory, hosts)
    script = directory / "discover.sh"
    script.write_text(f"#!/bin/sh\nexec cat '{hosts_file.path}'\n")
    script.chmod(0o755)
    return script, hosts_file


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Watch:
    """A `horovodctl watch` process whose lines arrive while it runs."""

    def __init__(self, daemon, *args):
        self.proc = subprocess.Popen(
            [str(HOROVODCTL), *daemon.client_args(), "watch", *[str(a) for a in args]],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True)
        self.lines = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()

    def wait_for_line(self, pattern, timeout=EVENT_DEADLINE):
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index, line in enumerate(self.lines):
                    if regex.search(line):
                        return index, regex.search(line)
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"watch never printed {pattern!r}:\n"
                                         + "\n".join(self.lines))
                self._cond.wait(min(left, 0.5))

    def wait(self, timeout=JOB_DEADLINE):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("watch did not end with the job:\n" + "\n".join(self.lines))
        self._reader.join(30)
        return self.proc.returncode

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def wait_ended(daemon, job_id):
    """Returns once the job has ended and its workers are gone (the watch
    stream ends after JOB_ENDED, which the daemon sends after the last exit)."""
    result = subprocess.run([str(HOROVODCTL), *daemon.client_args(), "watch", job_id],
                            capture_output=True, text=True, timeout=JOB_DEADLINE)
    assert "job ended" in result.stdout, result.stdout + result.stderr
    return ctl_json(daemon, "status", job_id)


def test_two_jobs_at_once_are_listed_with_their_status_and_logs(horovodd, horovodrun):
    daemon = horovodd()
    first = horovodrun(*daemon.client_args(), "--verbose",
                       *train("-np", 2, "-H", "localhost:2"))
    second = horovodrun(*daemon.client_args(), "--verbose",
                        *train("-np", 1, "-H", "127.0.0.1:1"))
    first_id = first.wait_for_line(SUBMITTED).group(1)
    second_id = second.wait_for_line(SUBMITTED).group(1)
    assert first_id != second_id
    first_pids = first.wait_for_size(2)
    second_pids = second.wait_for_size(1)

    listed = {job["job_id"]: job for job in ctl_json(daemon, "list")["jobs"]}
    assert set(listed) == {first_id, second_id}
    assert listed[first_id]["size"] == 2 and listed[second_id]["size"] == 1
    assert listed[first_id]["state"] == listed[second_id]["state"] == "RUNNING"
    table = ctl(daemon, "list")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split()[:4] == ["ID", "STATE", "GENERATION", "SIZE"]
    for job_id in (first_id, second_id):
        row = next(line for line in table.stdout.splitlines() if line.startswith(job_id + " "))
        assert row.split()[1] == "RUNNING"

    status = ctl_json(daemon, "status", first_id)
    assert status["job_id"] == first_id
    assert status["state"] == "RUNNING"
    assert status["generation"] == 1
    assert status["size"] == 2
    assert (status["min_np"], status["max_np"]) == (2, 2)
    assert status["spec"]["argv"][0] == str(ELASTIC_TRAIN)
    assert {rank: w["pid"] for rank, w in members(status).items()} == first_pids
    for worker in members(status).values():
        assert worker["host"] == "localhost"
        assert worker["state"] == "WORKER_RUNNING"
    hosts = [(h["host"], h["slots"], h["state"]) for h in status["hosts"]]
    assert hosts == [("localhost", 2, "usable")]
    assert status["resets"] == 0 and status["reset_history"] == []
    assert status["reason"] == "" and status["ended_unix"] == 0
    assert status["started_unix"] >= status["created_unix"] > 0
    second_status = ctl_json(daemon, "status", second_id)
    assert {r: w["pid"] for r, w in members(second_status).items()} == second_pids
    assert members(second_status)[0]["host"] == "127.0.0.1"

    human = ctl(daemon, "status", first_id)
    assert human.returncode == 0, human.stderr
    assert re.search(r"^State:\s+RUNNING$", human.stdout, re.M)
    assert re.search(r"^Size:\s+2 \(min 2, max 2\)$", human.stdout, re.M)
    for rank, pid in first_pids.items():
        row = rf"^{rank}\s+\d+\s+localhost\s+{pid}\s+RUNNING\s"
        assert re.search(row, human.stdout, re.M), human.stdout

    # Each rank's own output, newest lines last.
    logs = ctl(daemon, "logs", first_id, 1)
    assert logs.returncode == 0, logs.stderr
    assert f"rank 1/2 generation 1 pid {first_pids[1]}" in logs.stdout.splitlines()
    assert "rank 0/" not in logs.stdout
    newest = ctl(daemon, "logs", first_id, 0, "-n", 1)
    assert len(newest.stdout.splitlines()) == 1
    lines = ctl_json(daemon, "logs", first_id, 1)["lines"]
    assert lines and all(l["rank"] == 1 and l["stream"] == "stdout" for l in lines)

    for job_id in (first_id, second_id):
        assert ctl(daemon, "cancel", "--wait", job_id).returncode == 0
    # horovodrun reports the cancelled job with a non-zero exit.
    assert first.wait() != 0
    assert second.wait() != 0


def test_cancel_ends_the_job_and_its_workers(horovodd, horovodrun):
    daemon = horovodd()
    detached = horovodrun(*daemon.client_args(), "--detach",
                          *train("-np", 2, "-H", "localhost:2"))
    # --detach prints the job id and returns while the job goes on.
    assert detached.wait() == 0, detached.output()
    job_id = detached.output().strip()
    assert re.fullmatch(r"job-\d+", job_id), detached.output()
    assert ctl_json(daemon, "status", job_id)["state"] not in ENDED_STATES
    status = wait_status(daemon, job_id, running_with_size(2), "2 running workers")
    pids = [w["pid"] for w in members(status).values()]

    watch = Watch(daemon, job_id)
    try:
        cancel = ctl(daemon, "cancel", job_id, "--reason", "the test is over")
        assert cancel.returncode == 0, cancel.stderr
        assert cancel.stdout.strip() == f"{job_id} is being cancelled"
        # watch ends with the job: exit 1, since it did not succeed.
        assert watch.wait() == 1
        assert watch.lines[-1].endswith("job ended CANCELLED: the test is over"), watch.lines
    finally:
        watch.stop()
    for pid in pids:
        wait_pid_gone(pid)
    status = ctl_json(daemon, "status", job_id)
    assert status["state"] == "CANCELLED"
    assert status["reason"] == "the test is over"
    assert status["ended_unix"] >= status["started_unix"]
    assert all(w["state"] != "WORKER_RUNNING" for w in status["workers"])
    again = ctl(daemon, "cancel", job_id)
    assert again.returncode == 0
    assert again.stdout.strip() == f"{job_id} had already ended: CANCELLED"


def test_a_drained_host_loses_its_workers_at_the_next_commit(horovodd, horovodrun, tmp_path):
    daemon = horovodd()
    # Two names for this machine: two hosts as far as the job can tell.
    script, _ = discovery_script(tmp_path / "hosts", "localhost:2\n127.0.0.1:2")
    run = horovodrun(*daemon.client_args(), "--verbose",
                     *train("-np", 4, "--min-np", 2, "--max-np", 4,
                            "--host-discovery-script", script, "--discovery-interval", 0.2))
    job_id = run.wait_for_line(SUBMITTED).group(1)
    before = wait_status(daemon, job_id, running_with_size(4), "4 running workers")
    drained_pids = {w["pid"] for w in members(before).values() if w["host"] == "127.0.0.1"}
    assert len(drained_pids) == 2

    drain = ctl(daemon, "drain", "127.0.0.1", "--job", job_id)
    assert drain.returncode == 0, drain.stderr
    assert drain.stdout.strip() == f"host 127.0.0.1 drained in {job_id}"

    def drained(s):
        left = [w for w in s["workers"] if w["pid"] in drained_pids]
        return (running_with_size(2)(s) and s["generation"] > before["generation"]
                and all(w["host"] == "localhost" for w in members(s).values())
                and all(w["state"] == "WORKER_REMOVED" for w in left)
                and s["reset_history"] and s["reset_history"][-1]["resumed_unix"] > 0)
    after = wait_status(daemon, job_id, drained, "the drained host's workers to leave")
    for pid in drained_pids:
        wait_pid_gone(pid)
    assert all(w["exit_code"] == 0 for w in after["workers"] if w["pid"] in drained_pids)
    assert {h["host"]: h["state"] for h in after["hosts"]} == {"localhost": "usable",
                                                               "127.0.0.1": "drained"}
    reset = after["reset_history"][-1]
    assert reset["generation"] == after["generation"]
    assert "127.0.0.1 drained" in reset["cause"]
    assert reset["detected_unix"] <= reset["ready_unix"] <= reset["resumed_unix"]
    assert after["resets"] >= 1

    # Training goes on; discovery keeps listing 127.0.0.1, but nothing starts there.
    later = wait_status(daemon, job_id, lambda s: s["last_commit"] >= after["last_commit"] + 20,
                        "training to go on after the drain")
    assert later["size"] == 2
    assert not [w for w in later["workers"]
                if w["host"] == "127.0.0.1" and w["pid"] not in drained_pids], later["workers"]
    hosts = ctl_json(daemon, "hosts")["hosts"]
    assert {(h["host"], h["job_id"], h["state"]) for h in hosts} == {
        ("localhost", job_id, "usable"), ("127.0.0.1", job_id, "drained")}
    table = ctl(daemon, "hosts").stdout
    assert re.search(rf"^127\.0\.0\.1\s+{job_id}\s+2\s+drained\s", table, re.M), table

    # Undrained, the host gets new workers again.
    undrain = ctl(daemon, "undrain", "127.0.0.1")
    assert undrain.returncode == 0, undrain.stderr
    assert undrain.stdout.strip() == f"host 127.0.0.1 undrained in {job_id}"
    regrown = wait_status(daemon, job_id, running_with_size(4), "4 workers again")
    back = [w for w in members(regrown).values() if w["host"] == "127.0.0.1"]
    assert len(back) == 2 and not {w["pid"] for w in back} & drained_pids

    assert ctl(daemon, "cancel", job_id).returncode == 0
    assert run.wait() != 0


def test_watch_prints_membership_changes_live(horovodd, horovodrun, tmp_path):
    daemon = horovodd()
    script, hosts = discovery_script(tmp_path / "hosts", "localhost:2")
    run = horovodrun(*daemon.client_args(), "--detach",
                     *train("-np", 2, "--min-np", 2, "--max-np", 3,
                            "--host-discovery-script", script, "--discovery-interval", 0.2,
                            epochs=8, delay_ms=25))
    assert run.wait() == 0, run.output()
    job_id = run.output().strip()
    watch = Watch(daemon, job_id)
    try:
        first, _ = watch.wait_for_line(r"membership\s+generation 1 ready: size 2$")
        hosts.write("localhost:3")
        grown, match = watch.wait_for_line(
            r"membership\s+generation 2 ready: size 3, reset (\d+\.\d{3}) s$")
        assert float(match.group(1)) >= 0
        resetting, _ = watch.wait_for_line(r"state\s+job is RESETTING$")
        assert first < resetting < grown
        # It ends with the job: exit 0 because the job succeeded.
        assert watch.wait() == 0, "\n".join(watch.lines)
    finally:
        watch.stop()
    assert watch.lines[-1].endswith(
        "job ended SUCCEEDED: all 3 workers of generation 2 finished"), watch.lines
    # Only membership, warnings and states by default: no worker output, no INFO.
    hidden = re.compile(r"\s(info|output)\s|^\[\d+\]<")
    assert not [line for line in watch.lines if hidden.search(line)], watch.lines

    # An ended job's watch replays its events; --output-lines adds the workers' lines.
    replay = ctl(daemon, "watch", job_id, "--output-lines")
    assert replay.returncode == 0
    new_worker = r"^\[2\]<stdout>:rank 2/3 generation 2 pid \d+$"
    assert re.search(new_worker, replay.stdout, re.M), replay.stdout
    as_json = ctl(daemon, "--output", "json", "watch", job_id)
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    grown_event = next(e for e in events if e["kind"] == "MEMBERSHIP" and e["generation"] == 2)
    assert grown_event["size"] == 3 and grown_event["reset_seconds"] > 0
    assert events[-1]["kind"] == "JOB_ENDED" and events[-1]["state"] == "SUCCEEDED"


def test_bad_requests_say_what_is_wrong(horovodd):
    daemon = horovodd()
    assert ctl(daemon, "list").stdout == "No jobs.\n"
    unknown = "horovodctl: error: no job 'job-99'\n"
    for args in (["status", "job-99"], ["cancel", "job-99"], ["watch", "job-99"],
                 ["logs", "job-99", 0], ["drain", "localhost", "--job", "job-99"],
                 ["undrain", "localhost", "--job", "job-99"]):
        result = ctl(daemon, *args)
        assert (result.returncode, result.stderr) == (1, unknown), args
    # Nothing was made by those.
    assert ctl_json(daemon, "list")["jobs"] == []

    port = closed_port()
    unreachable = ctl(None, "--daemon", f"127.0.0.1:{port}", "list")
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith(
        f"horovodctl: error: cannot reach horovodd at 127.0.0.1:{port}: ")
    assert len(unreachable.stderr.splitlines()) == 1
    # Several daemons (an HA setup): the unreachable one is skipped; none
    # reachable names each one tried.
    listed = ctl(None, "--daemon", f"127.0.0.1:{port},{daemon.address}", "--token-file",
                 daemon.token_file, "list")
    assert (listed.returncode, listed.stdout) == (0, "No jobs.\n"), listed.stderr
    other = closed_port()
    none = ctl(None, "--daemon", f"127.0.0.1:{port},127.0.0.1:{other}", "list")
    assert none.returncode == 1
    assert none.stderr.startswith(
        f"horovodctl: error: cannot reach any horovodd; tried 127.0.0.1:{port} (unreachable: "), \
        none.stderr
    assert f"127.0.0.1:{other} (unreachable: " in none.stderr
    # $HOROVODD_ADDRESS names the daemon when --daemon does not.
    from_env = ctl(None, "list", env={"HOROVODD_ADDRESS": daemon.address,
                                      "HOROVODD_TOKEN_FILE": str(daemon.token_file)})
    assert (from_env.returncode, from_env.stdout) == (0, "No jobs.\n")

    for args, named in ((["frobnicate"], "unknown command 'frobnicate'"),
                        ([], "A subcommand is required"),
                        (["status"], "JOB is required"),
                        (["logs", "job-1", "-1"], "a rank is an integer >= 0, got '-1'"),
                        (["--output", "yaml", "list"], "yaml not in {table,json}")):
        result = ctl(daemon, *args)
        assert result.returncode == 2, args
        assert result.stderr.startswith("horovodctl: error: "), result.stderr
        assert named in result.stderr, result.stderr
    for args in (["--help"], ["watch", "--help"], ["drain", "--help"]):
        result = ctl(daemon, *args)
        assert result.returncode == 0 and "Usage:" in result.stdout, args


def test_ctrl_c_on_horovodrun_cancels_the_job(horovodd, horovodrun):
    daemon = horovodd()
    run = horovodrun(*daemon.client_args(), "--verbose",
                     *train("-np", 2, "-H", "localhost:2"))
    job_id = run.wait_for_line(SUBMITTED).group(1)
    pids = run.wait_for_size(2)
    os.kill(run.proc.pid, signal.SIGINT)
    assert run.wait() != 0
    assert f"cancelling job {job_id}" in run.output()
    assert "horovodrun: job CANCELLED: cancelled by horovodrun" in run.output(), run.output()
    for pid in pids.values():
        wait_pid_gone(pid)
    status = ctl_json(daemon, "status", job_id)
    assert status["state"] == "CANCELLED"
    assert status["reason"].startswith("cancelled by horovodrun")


def test_a_second_ctrl_c_stops_waiting_for_the_cancel(horovodd, horovodrun, tmp_path):
    daemon = horovodd()
    # A worker that ignores SIGTERM (so do its children): cancelling it takes
    # the daemon's grace period and a SIGKILL.
    stubborn = tmp_path / "stubborn.sh"
    stubborn.write_text("#!/bin/sh\ntrap '' TERM\necho \"started $$\"\n"
                        "while :; do sleep 0.2; done\n")
    stubborn.chmod(0o755)
    run = horovodrun(*daemon.client_args(), "--verbose", "-np", 1, "-H", "localhost:1",
                     stubborn)
    job_id = run.wait_for_line(SUBMITTED).group(1)
    pid = int(run.wait_for_line(r"<stdout>:started (\d+)").group(1))
    os.kill(run.proc.pid, signal.SIGINT)
    run.wait_for_line(rf"cancelling job {job_id}")
    os.kill(run.proc.pid, signal.SIGINT)
    assert run.wait() != 0
    assert f"stopped waiting; job {job_id} keeps running" in run.output()
    # The daemon still ends the job.
    status = wait_ended(daemon, job_id)
    assert status["state"] == "CANCELLED"
    wait_pid_gone(pid)
