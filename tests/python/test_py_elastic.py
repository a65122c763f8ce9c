"""The PyTorch elastic example (examples/pytorch_elastic_train.py) through
membership changes: the job grows, loses a SIGKILLed worker, shrinks. Every
epoch must train on every sample exactly once and the model must still
reach its accuracy."""

import os
import signal

from harness import HostsFile, read_result, wait_pid_gone
from python_harness import DISCOVER_HOSTS, REPO

EXAMPLE = REPO / "examples" / "pytorch_elastic_train.py"
EPOCHS = 5
SAMPLES = 2048


def start_example(python_job, tmp_path, np_, min_np, max_np, *horovodrun_args):
    return python_job(
        ["-np", np_, "--min-np", min_np, "--max-np", max_np, "--host-discovery-script",
         DISCOVER_HOSTS, "--discovery-interval", "0.2", *horovodrun_args],
        EXAMPLE, "--epochs", EPOCHS, "--samples", SAMPLES, "--step-delay-ms", 20,
        "--output", tmp_path / "result.json")


def check_result(tmp_path, final_size):
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == EPOCHS
    assert result["samples_per_epoch"] == [SAMPLES] * EPOCHS
    assert result["distinct_samples_per_epoch"] == [SAMPLES] * EPOCHS
    assert result["final_size"] == final_size
    assert result["accuracy"] >= 0.9
    assert result["resets"] >= 1
    return result


def test_grows_when_discovery_adds_a_slot(python_job, tmp_path):
    hosts = HostsFile(tmp_path, "localhost:2")
    run = start_example(python_job, tmp_path, 2, 2, 3)
    first = run.wait_for_size(2)
    hosts.write("localhost:3")
    grown = run.wait_for_size(3)
    assert grown[0] == first[0] and grown[1] == first[1]
    assert grown[2] not in first.values()
    assert run.wait() == 0, run.output()
    check_result(tmp_path, 3)


def test_survives_a_sigkilled_worker(python_job, tmp_path):
    HostsFile(tmp_path, "localhost:3")
    run = start_example(python_job, tmp_path, 3, 2, 3)
    workers = run.wait_for_size(3)
    run.wait_for_line(rf"epoch 1/{EPOCHS}", "the first epoch to end")
    os.kill(workers[1], signal.SIGKILL)
    # localhost goes into cooldown, so the survivors go on at size 2.
    after = run.wait_for_size(2)
    assert after == {0: workers[0], 1: workers[2]}
    assert run.wait() == 0, run.output()
    check_result(tmp_path, 2)


def test_shrinks_when_discovery_removes_a_slot(python_job, tmp_path):
    hosts = HostsFile(tmp_path, "localhost:3")
    run = start_example(python_job, tmp_path, 3, 2, 3, "--verbose")
    before = run.wait_for_size(3)
    run.wait_for_line(rf"epoch 1/{EPOCHS}", "the first epoch to end")
    hosts.write("localhost:2")
    after = run.wait_for_size(2)
    assert after == {0: before[0], 1: before[1]}
    # The removed worker leaves cleanly (exit 0).
    run.wait_for_line(r"left the job \(exited with status 0\)")
    wait_pid_gone(before[2])
    assert run.wait() == 0, run.output()
    check_result(tmp_path, 2)
