"""Horovod 0.28's behaviour where issue #33 found ours different (autograd,
reducescatter's ops, the optimizer, build info), in real jobs at 2 and 3
ranks: workers/horovod_compat_worker.py asserts Horovod's values, error
types and messages, and prints "compat SECTION ok rank R/S" per section.
A hang fails the test at the harness's deadline."""

import re

import pytest

from python_harness import BUILD, WORKERS

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


def _configured_nccl():
    """(NCCL_VERSION_CODE, CUDA found) of this build, from CMake's cache and
    the nccl.h it found: what hvd.nccl_built() and hvd.cuda_built() must
    say."""
    cache = (BUILD / "CMakeCache.txt").read_text()

    def cached(name):
        match = re.search(rf"^{name}:[A-Z]+=(.*)$", cache, re.MULTILINE)
        return match.group(1) if match else ""
    cuda = bool(cached("CUDAToolkit_NVCC_EXECUTABLE")) and \
        not cached("CUDAToolkit_NVCC_EXECUTABLE").endswith("NOTFOUND")
    include_dir, library = cached("HVDD_NCCL_INCLUDE_DIR"), cached("HVDD_NCCL_LIBRARY")
    found = all(path and not path.endswith("NOTFOUND") for path in (include_dir, library))
    if cached("HVDD_WITH_NCCL").upper() == "OFF" or not cuda or not found:
        return 0, cuda
    text = open(f"{include_dir}/nccl.h").read()
    major, minor, patch = (int(re.search(rf"#define NCCL_{part} +(\d+)", text).group(1))
                           for part in ("MAJOR", "MINOR", "PATCH"))
    if major <= 2 and minor <= 8:
        return major * 1000 + minor * 100 + patch, cuda
    return major * 10000 + minor * 100 + patch, cuda


def test_build_info_says_what_horovod_says(python_job):
    nccl, cuda = _configured_nccl()
    if nccl and nccl < 21400:
        nccl = 0  # find_nccl.cmake leaves NCCL out below 2.14
    run_sections(python_job, 2, ["build_info"],
                 env={"EXPECTED_NCCL_VERSION_CODE": str(nccl),
                      "EXPECTED_CUDA_BUILT": "1" if cuda else "0"})


@pytest.mark.parametrize("shm", ["1", "0"])
@pytest.mark.parametrize("np_", [2, 3])
def test_scale_factors_bit_for_bit(python_job, np_, shm):
    run_sections(python_job, np_, ["scaling"], env={"HOROVODD_SHM": shm})


@pytest.mark.parametrize("np_", [2, 3])
def test_reducescatter_async_is_asynchronous_and_names_are_unique(python_job, np_):
    run_sections(python_job, np_, ["reducescatter_async"])


@pytest.mark.parametrize("shm", ["1", "0"])
@pytest.mark.parametrize("np_", [2, 3])
def test_reducescatters_fuse(python_job, tmp_path, np_, shm):
    run_sections(python_job, np_, ["reducescatter_fusion"],
                 env={"TIMELINE_PATH": str(tmp_path / "timeline.json"),
                      "HOROVOD_CYCLE_TIME": "100", "HOROVODD_SHM": shm})


@pytest.mark.parametrize("np_", [2, 3])
def test_join_while_others_allreduce(python_job, np_):
    run_sections(python_job, np_, ["join"])
