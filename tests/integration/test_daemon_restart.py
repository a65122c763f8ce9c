"""Running jobs outlive horovodd (issue 20): a standalone daemon's elastic job
trains on while the daemon is SIGKILLed or SIGTERMed, and the daemon started
again on the same state dir and address takes it back: same workers, same
generation, no reset, every epoch's samples exactly once. What changed while
it was away is handled on its return (a worker killed meanwhile: the job
resets around it, and the output written during the outage reaches
`horovodctl logs`). Workers left alone past their grace period end, and the
job is recorded FAILED saying so. With shutdown.stop_jobs, SIGTERM ends the
jobs (CANCELLED) and nothing is left running. A host cooling down after a
failure is still cooling down after a restart, its time running on.
(test_daemon_chaos.py kills workers and daemons again and again.)

Real processes on loopback (harness.StandaloneDaemons): horovodd on a fixed
free port (its workers dial that address), horovodrun --detach to submit,
horovodctl --output json to read what an operator would see; every process
is ended by PID at the end."""

import json
import os
import re
import signal
import subprocess
import time

from harness import assert_succeeded
from harness import (CLI_DEADLINE, EVENT_DEADLINE, HOROVODCTL, HostsFile, _pid_alive, daemons,
                     read_result, running_pids, shim_pids, submit_elastic_train, wait_for,
                     wait_pid_gone)

SAMPLES = 2048


def submit(daemon, tmp_path, epochs, delay_ms, **kwargs):
    return submit_elastic_train(daemon, tmp_path, epochs, delay_ms, samples=SAMPLES, **kwargs)


def test_an_elastic_job_trains_through_a_sigkill_and_a_sigterm_of_its_daemon(daemons, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    daemon = daemons.start()
    job_id = submit(daemon, tmp_path, epochs=40, delay_ms=15)
    before = daemon.training(job_id, 2)
    pids = running_pids(before)
    generation = before["generation"]

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    # Not the daemon's children: nothing that killed it reaches them.
    time.sleep(4)
    assert all(_pid_alive(pid) for pid in pids), "a worker died with the daemon"

    daemon = daemons.start()
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
    daemon = daemons.start()
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    assert running_pids(daemon.status(job_id)) == pids

    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) == 0, daemon.output()
    assert final["generation"] == generation
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 40
    assert result["samples_per_epoch"] == [SAMPLES] * 40
    assert result.get("resets", 0) == 0
    for pid in pids:
        wait_pid_gone(pid)
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")


def test_a_worker_killed_while_the_daemon_is_down_is_handled_on_its_return(daemons, tmp_path):
    hosts = HostsFile(tmp_path, "localhost:2")
    daemon = daemons.start()
    job_id = submit(daemon, tmp_path, epochs=30, delay_ms=15, min_np=1)
    status = daemon.training(job_id, 2)
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

    daemon = daemons.start()
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
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


def test_workers_left_alone_past_their_grace_end_and_the_job_fails_saying_so(daemons, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    # The workers' grace period, short for the test (worker.daemon_grace).
    daemon = daemons.start()
    job_id = submit(daemon, tmp_path, epochs=1000, delay_ms=20,
                    env=["HOROVODD_DAEMON_GRACE_S=3"])
    pids = running_pids(daemon.training(job_id, 2))

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    for pid in pids:
        wait_pid_gone(pid)  # they end by themselves, after 3 s without a daemon

    daemon = daemons.start()
    final = daemon.ended(job_id)
    assert final["state"] == "FAILED", final
    assert "longer than the workers' grace period" in final["reason"], final
    lost = [l for l in daemon.logs(job_id, 0) if "lost the daemon" in l]
    assert lost, "the worker's own message did not reach the logs"
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")


def test_stop_jobs_makes_sigterm_end_the_jobs(daemons, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    config = tmp_path / "horovodd.yaml"
    config.write_text("shutdown:\n  stop_jobs: true\n")
    daemon = daemons.start(config=config)
    job_id = submit(daemon, tmp_path, epochs=1000, delay_ms=20)
    pids = running_pids(daemon.training(job_id, 2))

    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    for pid in pids:
        wait_pid_gone(pid)
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")

    daemon = daemons.start(config=config)
    status = daemon.status(job_id)
    assert status["state"] == "CANCELLED", status
    assert "SIGTERM" in status["reason"], status


def test_a_host_cooling_down_is_still_cooling_down_after_a_restart(daemons, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    daemon = daemons.start()
    # The first failure benches localhost for LO * 2 = 60 s (its survivor stays).
    job_id = submit(daemon, tmp_path, epochs=1000, delay_ms=20, min_np=1, cooldown=(30, 120))
    status = daemon.training(job_id, 2)
    os.kill(next(w["pid"] for w in status["workers"] if w.get("rank") == 1), signal.SIGKILL)

    def cooling(d):
        hosts = d.status(job_id).get("hosts", [])
        return next((h for h in hosts if h["host"] == "localhost" and h["state"] == "cooldown"),
                    None)
    before = wait_for(lambda: cooling(daemon), "localhost to cool down")
    daemon = daemons.restart(daemon, signal.SIGKILL)
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    after = cooling(daemon)
    assert after is not None, daemon.status(job_id)
    # The time that passed counts: it ends when it would have.
    assert 0 < after["cooldown_seconds_left"] <= before["cooldown_seconds_left"], (before, after)
    cancel = daemon.ctl("cancel", job_id, "--wait")
    assert cancel.returncode == 0, cancel



def test_horovodctl_stop_leaves_jobs_running_and_stop_jobs_ends_them(daemons, tmp_path):
    HostsFile(tmp_path, "localhost:2")
    daemon = daemons.start()
    job_id = submit(daemon, tmp_path, epochs=1000, delay_ms=20)
    pids = running_pids(daemon.training(job_id, 2))

    # As SIGTERM: the daemon exits 0 and its job runs on for the next one.
    stop = daemon.ctl("stop")
    assert stop.returncode == 0, (stop, daemon.output())
    assert "1 running job left running for the next horovodd" in stop.stdout, stop.stdout
    assert daemon.proc.wait(EVENT_DEADLINE) == 0, daemon.output()
    assert "horovodd stopped by" in daemon.output()
    assert all(_pid_alive(pid) for pid in pids), "a worker died with the daemon"

    daemon = daemons.start()
    daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
    assert running_pids(daemon.status(job_id)) == pids

    # --stop-jobs: the job ends CANCELLED with the reason given, nothing left running.
    stop = daemon.ctl("stop", "--stop-jobs", "--reason", "maintenance window",
                      "--output", "json")
    assert stop.returncode == 0, (stop, daemon.output())
    answer = json.loads(stop.stdout)
    assert answer.get("running_jobs") == 1 and not answer.get("jobs_left_running"), answer
    assert daemon.proc.wait(EVENT_DEADLINE) == 0, daemon.output()
    for pid in pids:
        wait_pid_gone(pid)
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")

    daemon = daemons.start()
    status = daemon.status(job_id)
    assert status["state"] == "CANCELLED", status
    assert status["reason"] == "maintenance window", status


def test_horovodctl_stop_needs_the_admin_token(daemons, tmp_path):
    daemon = daemons.start()
    viewer = tmp_path / "nobody.token"
    viewer.write_text("not-the-token\n")
    viewer.chmod(0o600)
    refused = subprocess.run([str(HOROVODCTL), "--daemon", daemon.address, "--token-file",
                              str(viewer), "stop"], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=CLI_DEADLINE)
    assert refused.returncode == 1, refused
    assert refused.stderr.startswith("horovodctl: error: "), refused.stderr
    assert daemon.proc.poll() is None, "a refused stop stopped the daemon"
    assert daemon.ctl("list").returncode == 0
