"""Restarting horovodd with the same --state-dir: jobs that ended are still
listed with their events; a job that was running is shown with what became of
it (SIGTERM with shutdown.stop_jobs: ended with the daemon's reason; SIGKILL:
its workers ran on under their shims and the restarted daemon takes it back;
its shims gone too: recorded FAILED, saying its workers were lost), never
silently lost. (tests/integration/test_daemon_restart.py trains through
restarts.)

Real processes (harness.StandaloneDaemons): horovodd on a free loopback
port, kept across restarts, horovodrun to submit, horovodctl --output json
to read back what an operator would see."""

import os
import signal

import pytest

from harness import (ELASTIC_TRAIN, _pid_alive, daemons, kill_shims, shim_pids, wait_for,
                     wait_pid_gone)


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
    daemon = daemons.start()
    run = horovodrun(*daemon.client_args(), "-np", 2, "-H", "localhost:2",
                     ELASTIC_TRAIN, "--epochs", 1)
    assert run.wait() == 0, run.output()
    (job_id,) = daemon.jobs()
    before = daemon.ctl_json("status", job_id)
    assert (before["state"], before["generation"], before["size"]) == ("SUCCEEDED", 1, 2)
    rc, events_before = daemon.watch(job_id)
    assert rc == 0

    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    daemon = daemons.start()

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
    config = tmp_path / "stop_jobs.yaml"
    config.write_text("shutdown:\n  stop_jobs: true\n")
    daemon = daemons.start(config=config)
    job_id = daemon.submit_detached("-np", 2, "-H", "localhost:2", "sleep", 600)
    worker_pids.extend(running_worker_pids(daemon, job_id, 2))

    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    for pid in worker_pids:
        wait_pid_gone(pid)
    daemon = daemons.start()

    job = daemon.jobs()[job_id]
    assert job["state"] == "CANCELLED", job
    assert "SIGTERM" in job["reason"], job
    rc, events = daemon.watch(job_id)
    assert rc == 1
    assert events[-1]["kind"] == "JOB_ENDED" and events[-1]["message"] == job["reason"]


def test_running_job_outlives_a_sigkilled_daemon_and_is_taken_back(
        daemons, worker_pids, tmp_path):
    state_dir = daemons.state_dir
    daemon = daemons.start()
    job_id = daemon.submit_detached("-np", 2, "-H", "localhost:2", "sleep", 600)
    worker_pids.extend(running_worker_pids(daemon, job_id, 2))
    before = daemon.ctl_json("status", job_id)

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    # The workers are the shim's children, not the daemon's: they run on.
    assert all(_pid_alive(pid) for pid in worker_pids)
    daemon = daemons.start()

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
    state_dir = daemons.state_dir
    daemon = daemons.start()
    job_id = daemon.submit_detached("-np", 2, "-H", "localhost:2", "sleep", 600)
    worker_pids.extend(running_worker_pids(daemon, job_id, 2))
    assert all(_pid_alive(pid) for pid in worker_pids)

    assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    kill_shims(state_dir)
    # The workers die with their shim (its parent-death signal): nothing is left.
    for pid in worker_pids:
        wait_pid_gone(pid)
    daemon = daemons.start()

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
