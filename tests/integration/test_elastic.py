"""The elastic core end to end: real horovodrun, embedded daemon, real
elastic_train workers on loopback; membership changed by editing the hosts
file the discovery script reads, and by killing and stopping workers."""

import os
import signal
import time

from harness import DISCOVER_HOSTS, ELASTIC_TRAIN, HostsFile, read_result, wait_pid_gone

SAMPLES = 4096


def elastic_args(tmp_path, np, min_np, max_np, *extra, delay_ms=25):
    return ["-np", np, "--min-np", min_np, "--max-np", max_np,
            "--host-discovery-script", DISCOVER_HOSTS, "--discovery-interval", "0.2",
            *extra, ELASTIC_TRAIN, "--epochs", "3", "--samples", SAMPLES,
            "--step-delay-ms", delay_ms, "--output", tmp_path / "result.json"]


def check_converged_result(tmp_path, final_size):
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 3
    assert result["samples_per_epoch"] == [SAMPLES] * 3
    assert result["final_size"] == final_size
    assert result["weight_error"] < 0.01
    return result


def test_grows_when_discovery_adds_slots(horovodrun, tmp_path):
    hosts = HostsFile(tmp_path, "localhost:2")
    run = horovodrun(*elastic_args(tmp_path, 2, 2, 4, "--verbose"))
    first = run.wait_for_size(2)
    hosts.write("localhost:4")
    grown = run.wait_for_size(4)
    # The two original workers kept their ranks; two new ones were appended.
    assert grown[0] == first[0] and grown[1] == first[1]
    assert {grown[2], grown[3]}.isdisjoint(first.values())
    assert run.wait() == 0, run.output()
    result = check_converged_result(tmp_path, 4)
    assert result["resets"] >= 1


def test_shrinks_when_discovery_removes_slots(horovodrun, tmp_path):
    hosts = HostsFile(tmp_path, "localhost:4")
    run = horovodrun(*elastic_args(tmp_path, 4, 2, 4, "--verbose"))
    before = run.wait_for_size(4)
    hosts.write("localhost:2")
    after = run.wait_for_size(2)
    # The lowest ranks stay; the removed workers leave cleanly (exit 0).
    assert after == {0: before[0], 1: before[1]}
    run.wait_for_line(r"left the job \(exited with status 0\)")
    for rank in (2, 3):
        wait_pid_gone(before[rank])
    assert run.wait() == 0, run.output()
    check_converged_result(tmp_path, 2)


def test_survives_a_killed_worker(horovodrun, tmp_path):
    HostsFile(tmp_path, "localhost:3")
    run = horovodrun(*elastic_args(tmp_path, 3, 2, 3))
    workers = run.wait_for_size(3)
    run.wait_for_line(r"epoch 1/3", "the first epoch to end")
    os.kill(workers[1], signal.SIGKILL)
    # localhost goes into cooldown, so the survivors go on at size 2.
    after = run.wait_for_size(2)
    assert after[0] == workers[0] and after[1] == workers[2]
    assert run.wait() == 0, run.output()
    result = check_converged_result(tmp_path, 2)
    assert result["resets"] >= 1
    assert "exited with status" not in run.output() or "killed by signal 9" in run.output()


def test_a_stopped_worker_is_declared_lost(horovodrun, tmp_path):
    HostsFile(tmp_path, "localhost:3")
    run = horovodrun(*elastic_args(tmp_path, 3, 2, 3, "--liveness-timeout", "3"))
    workers = run.wait_for_size(3)
    run.wait_for_line(r"epoch 1/3", "the first epoch to end")
    os.kill(workers[2], signal.SIGSTOP)
    try:
        # The daemon notices the silence (no transport timeout of minutes),
        # kills the worker and the survivors go on without it.
        run.wait_for_line(r"lost: silent for .*--liveness-timeout 3", "the liveness check")
        wait_pid_gone(workers[2])
        after = run.wait_for_size(2)
        assert after == {0: workers[0], 1: workers[1]}
        assert run.wait() == 0, run.output()
        check_converged_result(tmp_path, 2)
    finally:
        try:
            os.kill(workers[2], signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_stopped_daemon_does_not_declare_its_live_workers_silent(horovodrun, tmp_path):
    # horovodrun (its embedded daemon) stopped for 6 s, three times the default
    # --liveness-timeout, as a stalled machine or a debugger would stop it: the workers went
    # on heartbeating into its sockets. On waking it has not heard them for 6 s, but it was
    # not listening: none of them is lost, and the job ends with no reset.
    HostsFile(tmp_path, "localhost:2")
    run = horovodrun(*elastic_args(tmp_path, 2, 2, 2, delay_ms=40))
    workers = run.wait_for_size(2)
    run.wait_for_line(r"epoch 1/3", "the first epoch to end")
    os.kill(run.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(6)  # the stall itself is what is tested: no condition to wait for
    finally:
        os.kill(run.proc.pid, signal.SIGCONT)
    assert run.wait() == 0, run.output()
    assert "lost:" not in run.output(), run.output()
    assert run.count(r"horovodd did not run for \d+ ms \(the daemon or its machine was "
                     r"stalled\)") >= 1, run.output()
    assert check_converged_result(tmp_path, 2)["resets"] == 0
    assert run.workers() == workers


def test_fixed_size_job_without_discovery(horovodrun, tmp_path):
    run = horovodrun("-np", 4, "-H", "localhost:4", ELASTIC_TRAIN, "--epochs", 3,
                     "--output", tmp_path / "result.json")
    workers = run.wait_for_size(4)
    assert sorted(workers) == [0, 1, 2, 3]
    assert run.wait() == 0, run.output()
    result = check_converged_result(tmp_path, 4)
    assert result["resets"] == 0
    # Output carries Horovod's rank prefix.
    assert run.count(r"^\[0\]<stdout>:epoch 3/3") == 1


def test_network_interface_picks_the_ring_address(horovodrun, tmp_path):
    run = horovodrun("-np", 2, "-H", "localhost:2", "--network-interface", "lo", ELASTIC_TRAIN,
                     "--epochs", 1, "--output", tmp_path / "result.json")
    assert run.wait() == 0, run.output()
    assert read_result(tmp_path / "result.json")["final_size"] == 2


def test_unknown_network_interface_is_named_in_the_failure(horovodrun, tmp_path):
    run = horovodrun("-np", 2, "-H", "localhost:2", "--network-interface", "nosuchif0",
                     "--elastic-timeout", 10, ELASTIC_TRAIN, "--epochs", 1)
    assert run.wait() != 0
    assert "nosuchif0" in run.output(), run.output()


SLOW_JOINER = """#!/bin/sh
# Workers planned at rank 2 and up start only once the test's gate exists, as a worker that
# imports a framework takes its time to start.
if [ "$HOROVOD_RANK" -ge 2 ]; then
  while [ ! -e "{gate}" ]; do sleep 0.05; done
fi
exec "$@"
"""


def test_members_train_on_while_a_new_worker_starts(horovodrun, tmp_path):
    gate = tmp_path / "gate"
    wrapper = tmp_path / "slow_joiner.sh"
    wrapper.write_text(SLOW_JOINER.format(gate=gate))
    wrapper.chmod(0o755)
    hosts = HostsFile(tmp_path, "localhost:2")
    run = horovodrun("-np", 2, "--min-np", 2, "--max-np", 3, "--host-discovery-script",
                     DISCOVER_HOSTS, "--discovery-interval", "0.2", "--verbose", wrapper,
                     ELASTIC_TRAIN, "--epochs", 40, "--samples", 1024, "--step-delay-ms", 10,
                     "--output", tmp_path / "result.json")
    first = run.wait_for_size(2)
    hosts.write("localhost:3")
    run.wait_for_line(r"started worker 3 on localhost", "the third worker to start")
    epochs_before = run.count(r"epoch \d+/40 .* size 2$")
    # The two members keep training at size 2 while the third is held at its start: they
    # hear of the new generation only once it waits for it.
    run.wait_for(lambda lines: run.count(r"epoch \d+/40 .* size 2$") >= epochs_before + 2,
                 "two more epochs at size 2 while the new worker starts")
    assert run.count(r"the new workers of generation \d+ are ready") == 0
    gate.touch()
    grown = run.wait_for_size(3)
    assert grown[0] == first[0] and grown[1] == first[1]
    assert run.count(r"the new workers of generation \d+ are ready") == 1
    assert run.wait() == 0, run.output()
    result = read_result(tmp_path / "result.json")
    assert result["epochs_completed"] == 40
    assert result["final_size"] == 3
    assert result["weight_error"] < 0.01
