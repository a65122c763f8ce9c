"""How an elastic job ends when workers leave around the moment training
finishes: a failure already absorbed by a planned reset must not keep the
job from succeeding once every other worker has finished."""

from python_harness import WORKERS

LATE_FAILURE = WORKERS / "late_failure.py"


def test_failure_before_the_others_finish_is_absorbed(python_job, tmp_path):
    run = python_job(["-np", 3, "--min-np", 2, "--max-np", 3, "-H", "localhost:3",
                      "--blacklist-cooldown-range", 0, 0, "--verbose"], LATE_FAILURE)
    assert run.wait() == 0, run.output()
    assert "exited with status 3" in run.output()
    assert run.lines[-1] == ("horovodrun: job succeeded: 2 workers of generation 1 finished "
                             "(1 had left or failed before)"), run.output()
