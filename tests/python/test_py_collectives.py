"""horovodd.torch's collectives and DistributedOptimizer in real jobs: each
worker script asserts against numpy or single-process torch and exits
non-zero on a mismatch."""

import pytest

from python_harness import DISCOVER_HOSTS, WORKERS


def fixed_size(np_):
    return ["-np", np_, "-H", f"localhost:{np_}"]


@pytest.mark.parametrize("np_", [2, 3])
def test_every_op_matches_numpy(python_job, np_):
    run = python_job(fixed_size(np_), WORKERS / "ops_worker.py")
    assert run.wait() == 0, run.output()
    for rank in range(np_):
        assert run.count(rf"^\[{rank}\]<stdout>:ops ok rank {rank}/{np_}$") == 1, run.output()


def test_distributed_optimizer_matches_single_process_training(python_job):
    run = python_job(fixed_size(2), WORKERS / "optimizer_worker.py")
    assert run.wait() == 0, run.output()
    for rank in range(2):
        assert run.count(rf"^\[{rank}\]<stdout>:optimizer ok rank {rank}/2$") == 1, run.output()


def test_other_threads_run_while_a_collective_waits(python_job, tmp_path):
    run = python_job(fixed_size(2), WORKERS / "runtime_behaviour_worker.py", "gil", tmp_path)
    assert run.wait() == 0, run.output()
    assert run.count(r"<stdout>:rank \d: barrier done$") == 2, run.output()


def test_ctrl_c_ends_a_blocked_collective_with_keyboard_interrupt(python_job, tmp_path):
    # Rank 1 never enters the barrier; the short ring timeout bounds the wait.
    run = python_job(fixed_size(2), WORKERS / "runtime_behaviour_worker.py", "sigint",
                     tmp_path, env={"HOROVODD_RING_TIMEOUT_S": "5"})
    run.wait_for_line(r"^\[0\]<stdout>:rank 0: barrier ended with ", "rank 0's barrier to end")
    assert run.count(r"^\[0\]<stdout>:rank 0: barrier ended with KeyboardInterrupt$") == 1, \
        run.output()
    run.wait_for_line(r"^\[1\]<stdout>:rank 1: saw rank 0 exit$", "rank 0 to exit")
    assert run.wait() == 0, run.output()


def test_a_lost_peer_raises_horovod_internal_error(python_job, tmp_path):
    (tmp_path / "hosts.txt").write_text("localhost:2\n")
    run = python_job(["-np", 2, "--min-np", 1, "--max-np", 2, "--host-discovery-script",
                      DISCOVER_HOSTS, "--discovery-interval", "0.2"],
                     WORKERS / "runtime_behaviour_worker.py", "lost-peer", tmp_path)
    assert run.wait() == 0, run.output()
    assert run.count(r"^\[0\]<stdout>:rank 0: HorovodInternalError: .*(failed|aborted)") == 1, \
        run.output()
    assert run.count(r"^\[0\]<stdout>:rank 0: resumed at size 1$") == 1, run.output()


def test_a_lost_peer_fails_every_pending_async_handle(python_job, tmp_path):
    (tmp_path / "hosts.txt").write_text("localhost:2\n")
    run = python_job(["-np", 2, "--min-np", 1, "--max-np", 2, "--host-discovery-script",
                      DISCOVER_HOSTS, "--discovery-interval", "0.2"],
                     WORKERS / "runtime_behaviour_worker.py", "lost-peer-async", tmp_path)
    assert run.wait() == 0, run.output()
    assert run.count(r"^\[0\]<stdout>:rank 0: 3 of 3 handles raised HorovodInternalError$") \
        == 1, run.output()
    assert run.count(r"^\[0\]<stdout>:rank 0: resumed at size 1, sum 1$") == 1, run.output()
