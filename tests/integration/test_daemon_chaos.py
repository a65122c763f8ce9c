"""The chaos run (issue 20): a standalone daemon's elastic job of 2-3 local
workers has a worker SIGKILLed every 10 s and its daemon SIGKILLed and
started again every 30 s, for two minutes. The job still finishes SUCCEEDED
with every sample of every epoch seen exactly once, and nothing is left
running: no worker, no shim, no daemon (checked by PID).

The kills come at fixed offsets after the job started training (a schedule,
not a guess at timing); every assertion is on the outcome. Real processes
on loopback (harness.StandaloneDaemons)."""

import os
import signal
import time

from harness import (HostsFile, _pid_alive, daemons, read_result, running_pids, shim_pids,
                     submit_elastic_train, wait_for, wait_pid_gone)

SAMPLES = 1024
# Its steps sleep 820 * 16 * 10 ms = 131 s in all, so even a fast machine
# trains through the two minutes; a loaded one ends about a minute later.
EPOCHS = 820
CHAOS_SECONDS = 120
WORKER_KILL_EVERY = 10
DAEMON_KILL_EVERY = 30
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


def test_a_job_survives_two_minutes_of_killed_workers_and_daemons(daemons, tmp_path):
    HostsFile(tmp_path, "localhost:3")
    daemon = daemons.start()
    job_id = submit_elastic_train(daemon, tmp_path, epochs=EPOCHS, delay_ms=10, np=3, min_np=2,
                                  max_np=3, samples=SAMPLES)
    status = daemon.training(job_id, 3)
    workers_seen = set(running_pids(status))
    daemon_pids = [daemon.proc.pid]
    worker_kills = daemon_kills = 0
    start = time.monotonic()

    for tick in range(1, CHAOS_SECONDS // WORKER_KILL_EVERY + 1):
        sleep_until(start + tick * WORKER_KILL_EVERY)
        # Back at full size first (the killed worker's replacement joined),
        # so that a kill never takes the job below --min-np.
        status = daemon.training(job_id, 3)
        assert status["state"] not in TERMINAL, (
            f"the job ended {tick * WORKER_KILL_EVERY} s into the chaos: {status}")
        workers_seen.update(running_pids(status))
        # A different rank each time, rank 0 too.
        ranked = sorted((w["rank"], w["pid"]) for w in status["workers"]
                        if w.get("state") == "WORKER_RUNNING")
        victim = ranked[tick % len(ranked)][1]
        if tick * WORKER_KILL_EVERY % DAEMON_KILL_EVERY == 0:
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

    assert daemon_kills == CHAOS_SECONDS // DAEMON_KILL_EVERY
    assert worker_kills == CHAOS_SECONDS // WORKER_KILL_EVERY

    final = daemon.ended(job_id)
    assert final["state"] == "SUCCEEDED", (final, daemon.output())
    assert final.get("resets", 0) >= 1, final
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == EPOCHS
    # Every sample of every epoch once, through every kill.
    assert result["samples_per_epoch"] == [SAMPLES] * EPOCHS

    # Nothing left: every worker the job had, its shim, and (after a SIGTERM,
    # which leaves no job behind now) the daemon.
    workers_seen.update(w["pid"] for w in final["workers"] if w.get("pid", 0) > 0)
    for pid in workers_seen:
        wait_pid_gone(pid)
    wait_for(lambda: not shim_pids(tmp_path), "the job's shim to end")
    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    assert not [pid for pid in daemon_pids if _pid_alive(pid)]
