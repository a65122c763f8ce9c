"""Horovod 0.28's behaviour where issue #33 found ours different (autograd,
reducescatter's ops, the optimizer, build info), in real jobs at 2 and 3
ranks: workers/horovod_compat_worker.py asserts Horovod's values, error
types and messages, and prints "compat SECTION ok rank R/S" per section.
A hang fails the test at the harness's deadline."""

import pytest

from python_harness import WORKERS

WORKER = WORKERS / "horovod_compat_worker.py"


def fixed_size(np_):
    return ["-np", np_, "-H", f"localhost:{np_}", "--liveness-timeout", 60]


def run_sections(python_job, np_, sections, env=None):
    run = python_job(fixed_size(np_), WORKER, *sections, env=env)
    assert run.wait() == 0, run.output()
    for section in sections:
        for rank in range(np_):
            assert run.count(rf"^\[{rank}\]<stdout>:compat {section} ok rank {rank}/{np_}$") == 1, \
                f"section {section}, rank {rank}:\n{run.output()}"


@pytest.mark.parametrize("np_", [2, 3])
def test_autograd_gives_horovods_gradients(python_job, np_):
    run_sections(python_job, np_, ["autograd"])


@pytest.mark.parametrize("np_", [2, 3])
def test_autograd_over_process_sets(python_job, np_):
    run_sections(python_job, np_, ["autograd_process_sets"],
                 env={"HOROVOD_DYNAMIC_PROCESS_SETS": "1"})


@pytest.mark.parametrize("np_", [2, 3])
def test_reducescatter_refuses_the_ops_horovod_refuses(python_job, np_):
    run_sections(python_job, np_, ["reducescatter_ops"])


@pytest.mark.parametrize("np_", [2, 3])
def test_broadcast_optimizer_state_with_frozen_parameters(python_job, np_):
    run_sections(python_job, np_, ["optimizer_state"])


@pytest.mark.parametrize("np_", [2, 3])
def test_distributed_optimizer_names_unnamed_parameters_as_horovod(python_job, np_):
    run_sections(python_job, np_, ["parameter_names"])


@pytest.mark.parametrize("np_", [2, 3])
def test_sparse_gradients_stay_sparse(python_job, np_):
    run_sections(python_job, np_, ["sparse"])


@pytest.mark.parametrize("np_", [2, 3])
def test_distributed_optimizer_over_a_process_set(python_job, np_):
    run_sections(python_job, np_, ["optimizer_process_set"],
                 env={"HOROVOD_DYNAMIC_PROCESS_SETS": "1"})
