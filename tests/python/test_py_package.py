"""The package on its own, without a job: import, errors before init(),
ElasticSampler's bookkeeping."""

import subprocess

from python_harness import PYTHON, WORKERS, package_env


def python(*args):
    """/usr/bin/python3 ARGS with the package from the build tree."""
    return subprocess.run([PYTHON, *args], env=package_env(), capture_output=True, text=True,
                          timeout=120)


def test_numpy_users_do_not_pay_for_torch():
    result = python("-c", "import sys\nimport horovodd\n"
                    "print('torch' in sys.modules, horovodd.Sum, horovodd.Compression.fp16)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("False ReduceOp.Sum"), result.stdout


def test_outside_a_job_init_names_what_is_missing():
    result = python("-c", "import horovodd.torch as hvd\n"
                    "try:\n"
                    "    hvd.init()\n"
                    "except RuntimeError as error:\n"
                    "    print('RuntimeError:', error)\n"
                    "print('initialized:', hvd.is_initialized())\n")
    assert result.returncode == 0, result.stderr
    assert "RuntimeError: HOROVODD_DAEMON_ADDR is not set" in result.stdout
    assert "initialized: False" in result.stdout


def test_calls_before_init_raise_value_error():
    result = python("-c", "import numpy as np\nimport horovodd as hvd\n"
                    "for call in (hvd.rank, hvd.size, hvd.barrier,\n"
                    "             lambda: hvd.allreduce(np.ones(2))):\n"
                    "    try:\n"
                    "        call()\n"
                    "    except ValueError as error:\n"
                    "        print(error)\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == [f"horovodd has not been initialized: call hvd.init() before {what}"
                     for what in ("rank", "size", "barrier", "allreduce")], lines


def test_exceptions_are_runtime_errors_like_horovods():
    result = python("-c", "import horovodd.torch as hvd\n"
                    "print(issubclass(hvd.HorovodInternalError, RuntimeError),\n"
                    "      issubclass(hvd.HostsUpdatedInterrupt, RuntimeError),\n"
                    "      hvd.elastic.HorovodInternalError is hvd.HorovodInternalError)\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True"]


def test_elastic_sampler_trains_every_sample_once_across_membership_changes():
    result = python(str(WORKERS / "sampler_partition.py"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sampler ok" in result.stdout
