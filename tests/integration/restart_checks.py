"""What a job that lived through daemon restarts must show at its end (the
SSH and Slurm variants of test_daemon_restart.py share it)."""

from harness import read_result, wait_pid_gone, assert_succeeded
from test_daemon_restart import SAMPLES


def assert_finished_without_reset(daemon, job_id, result_file, epochs, generation, pids):
    """The job ends SUCCEEDED in `generation` with no reset, every epoch saw
    every sample exactly once, and its workers (`pids`) are gone."""
    final = daemon.ended(job_id)
    assert_succeeded(daemon, final)
    assert final.get("resets", 0) == 0, daemon.output()
    assert final["generation"] == generation, final
    result = read_result(result_file)
    assert result["epochs_completed"] == epochs
    assert result["samples_per_epoch"] == [SAMPLES] * epochs
    assert result.get("resets", 0) == 0
    for pid in pids:
        wait_pid_gone(pid)
