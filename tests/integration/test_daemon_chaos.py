"""The chaos run (issue 20): a standalone daemon's elastic job of 2-3 local
workers has a worker SIGKILLed, again and again, and every third time its
daemon SIGKILLed first and started again on the same state dir. The job still
finishes SUCCEEDED with every sample of every epoch seen exactly once, and
nothing is left running: no worker, no shim, no daemon (checked by PID).

Each kill comes once the job is back at full size and has trained in the
generation the previous kill caused (a commit there), not after a fixed
time, so the rounds are as many on a slow machine as on a fast one; the
job trains until the test has made its last kill and asks it to stop (the
stop file: it ends at the next epoch boundary). Every assertion is on the
outcome. Real processes on loopback (harness.StandaloneDaemons)."""

import os
import signal
import time

from harness import assert_succeeded
from harness import (HostsFile, _pid_alive, daemons, read_result, running_pids, shim_pids,
                     submit_elastic_train, wait_for, wait_pid_gone)

SAMPLES = 1024
# An upper bound the job never reaches: the stop file ends it.
EPOCHS = 100000
WORKER_KILLS = 12
DAEMON_KILL_EVERY = 3  # every third worker kill comes while the daemon is down
# How long the daemon stays away each time; a worker dies meanwhile.
OUTAGE_SECONDS = 3
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def sleep_until(moment):
    left = moment - time.monotonic()
    if left > 0:
        time.sleep(left)


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def trained_at_full_size(daemon, job_id, after_generation):
    """Waits until the job has 3 running workers in a generation past
    `after_generation` that has committed (training resumed there); its status."""
    def ready():
        status = daemon.status(job_id)
        assert status["state"] not in TERMINAL, f"the job ended during the chaos: {status}"
        live = running_pids(status)
        resumed = {r["generation"]: r.get("resumed_unix", 0) > 0
                   for r in status.get("reset_history", [])}
        generation = status.get("generation", 0)
        if (status.get("size") == 3 and len(live) == 3 and generation > after_generation
                and resumed.get(generation, False)):
            return status
        return None
    return wait_for(ready, f"{job_id} to train again with 3 workers after generation "
                           f"{after_generation}")


def test_a_job_survives_killed_workers_and_daemons(daemons, tmp_path):
    HostsFile(tmp_path, "localhost:3")
    stop_file = tmp_path / "stop"
    daemon = daemons.start()
    job_id = submit_elastic_train(daemon, tmp_path, epochs=EPOCHS, delay_ms=10, np=3, min_np=2,
                                  max_np=3, samples=SAMPLES,
                                  extra_train_args=("--stop-file", stop_file))
    status = daemon.training(job_id, 3)
    workers_seen = set(running_pids(status))
    daemon_pids = [daemon.proc.pid]
    worker_kills = daemon_kills = 0

    for round_ in range(1, WORKER_KILLS + 1):
        if round_ > 1:
            status = trained_at_full_size(daemon, job_id, status["generation"])
        workers_seen.update(running_pids(status))
        # A different rank each time, rank 0 too.
        ranked = sorted((w["rank"], w["pid"]) for w in status["workers"]
                        if w.get("state") == "WORKER_RUNNING")
        victim = ranked[round_ % len(ranked)][1]
        if round_ % DAEMON_KILL_EVERY == 0:
            # The daemon goes first; the worker dies while it is away.
            outage_ends = time.monotonic() + OUTAGE_SECONDS
            assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
            daemon_kills += 1
            kill(victim)
            worker_kills += 1
            sleep_until(outage_ends)
            daemon = daemons.start()
            daemon_pids.append(daemon.proc.pid)
            daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
        else:
            kill(victim)
            worker_kills += 1

    assert daemon_kills == WORKER_KILLS // DAEMON_KILL_EVERY
    assert worker_kills == WORKER_KILLS
    # Trained after the last kill too, then asked to stop.
    trained_at_full_size(daemon, job_id, status["generation"])
    stop_file.touch()

    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) >= 1, final
    result = read_result(tmp_path / "result.json")
    epochs = result["epochs_completed"]
    assert 1 <= epochs < EPOCHS, result
    # Every sample of every epoch once, through every kill.
    assert result["samples_per_epoch"] == [SAMPLES] * epochs

    # Nothing left: every worker the job had, its shim, and (after a SIGTERM,
    # which leaves no job behind now) the daemon.
    workers_seen.update(w["pid"] for w in final["workers"] if w.get("pid", 0) > 0)
    for pid in workers_seen:
        wait_pid_gone(pid)
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")
    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    assert not [pid for pid in daemon_pids if _pid_alive(pid)]
