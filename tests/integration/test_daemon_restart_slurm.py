"""Slurm steps outlive horovodd (issue 20): with a state dir, each worker's
`srun` runs under the job's horovodd-shim, not as the daemon's child, so a
SIGKILLed daemon ends neither srun nor its step, and the daemon started again
on the same state dir and address takes the workers back through the shim.

A private Slurm cluster (slurm_cluster.py: slurmctld and two slurmd on this
machine); the job is submitted with `horovodrun --detach --launcher slurm`
from inside an allocation that a small script keeps open. Modelled on
test_daemon_restart.py, whose helpers are used; everything is ended by PID or
scancel at the end."""

import os
import signal
import subprocess
import time

from harness import ELASTIC_TRAIN, HOROVODRUN, Daemon, _pid_alive, free_port, kill_shims, running_pids, \
    wait_for
from restart_checks import assert_finished_without_reset
from test_daemon_restart import SAMPLES
from test_slurm import slurm  # noqa: F401 (the module's private Slurm cluster)

# Submits "$@" from inside the allocation and keeps the allocation open.
SUBMIT = """#!/bin/sh
echo "$SLURM_JOB_ID" > allocation.txt
"$@" > job.txt 2> submit.err || exit 1
exec sleep 600
"""


def read_text(path):
    return path.read_text().strip() if path.exists() else ""


def test_slurm_steps_train_through_a_sigkill_of_their_daemon(slurm, tmp_path):
    listen = f"127.0.0.1:{free_port()}"
    daemons = []
    salloc = None

    def start():
        daemons.append(Daemon(tmp_path / "state", listen, tmp_path, env=slurm.env()))
        return daemons[-1]

    try:
        daemon = start()
        script = tmp_path / "submit.sh"
        script.write_text(SUBMIT)
        script.chmod(0o755)
        args = ["salloc", "-N2", "--ntasks-per-node=1", script, HOROVODRUN,
                *daemon.client_args(), "--detach", "--launcher", "slurm", "-np", 2,
                ELASTIC_TRAIN, "--epochs", 30, "--samples", SAMPLES, "--step-delay-ms", 15,
                "--output", tmp_path / "result.json"]
        salloc = subprocess.Popen([str(a) for a in args], cwd=tmp_path, env=slurm.env(),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        job_id = wait_for(lambda: read_text(tmp_path / "job.txt") or
                          salloc.poll() is not None and "failed", "the job's submission")
        assert job_id.startswith("job-"), read_text(tmp_path / "submit.err")
        allocation = read_text(tmp_path / "allocation.txt")
        before = daemon.training(job_id, 2)
        pids = running_pids(before)  # the srun processes, on this machine

        assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
        time.sleep(4)
        assert all(_pid_alive(pid) for pid in pids), "an srun died with the daemon"
        steps = [s for s in slurm.steps(allocation) if " hvdd." in s]
        assert len(steps) == 2, steps

        daemon = start()
        daemon.wait_for_output(f"job {job_id} taken back", "the job to be taken back")
        assert running_pids(daemon.status(job_id)) == pids
        assert_finished_without_reset(daemon, job_id, tmp_path / "result.json", 30,
                                      before["generation"], pids)
        wait_for(lambda: not [s for s in slurm.steps(allocation) if " hvdd." in s],
                 "the steps to end")
    finally:
        allocation = read_text(tmp_path / "allocation.txt")
        if allocation:
            subprocess.run(["scancel", allocation], env=slurm.env(), timeout=30)
        if salloc is not None and salloc.poll() is None:
            os.killpg(salloc.pid, signal.SIGKILL)
            salloc.wait(30)
        for daemon in daemons:
            daemon.cleanup()
        kill_shims(tmp_path)
