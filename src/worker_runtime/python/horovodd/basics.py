"""Joining and leaving the job, and this worker's place in it."""

import atexit
import sys

from horovodd import _horovodd
from horovodd import process_sets as _process_sets

try:
    from horovodd import _build_info
except ImportError:  # a source tree without CMake's file: a CPU-only build
    _build_info = None


def flush_std_streams():
    """Flushes Python's stdout and stderr. The runtime ends a worker the daemon
    removed from the job with exit(0) from C++, which skips Python's own
    flushing, so this runs before every call that may do so."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def init(comm=None, process_sets=None):
    """Joins the job that launched this process and builds the rings.

    Idempotent. Raises RuntimeError when the process was not started by
    horovodrun (the message names the missing environment variable). A worker
    the job no longer needs exits here with status 0.

    comm: Horovod's MPI communicator argument; horovodd has no MPI, so only
    None (every rank of the job) is accepted.
    process_sets: a list of ProcessSet (or rank lists) to register now, the
    same on every rank; or "dynamic" to allow add_process_set() later (as
    HOROVOD_DYNAMIC_PROCESS_SETS=1 does)."""
    if comm is not None and not (isinstance(comm, (list, tuple)) and not comm):
        raise ValueError("init(comm=...) needs MPI, which horovodd does not use: launch with "
                         "horovodrun and call init() without comm")
    flush_std_streams()
    _horovodd.init()
    _process_sets.global_process_set.ranks = list(range(_horovodd.size()))
    _process_sets.setup_at_init(process_sets)


def shutdown():
    """Leaves the job's rings and closes the daemon connection. Idempotent;
    also runs at interpreter exit."""
    _process_sets.forget_all()
    _horovodd.shutdown()


def is_initialized():
    return _horovodd.is_initialized()


def rank():
    """This worker's rank in the current generation of the job."""
    return _horovodd.rank()


def size():
    """Workers in the current generation of the job."""
    return _horovodd.size()


def generation():
    """The job's current generation (horovodd's, not in Horovod): it grows
    with every change of membership."""
    return _horovodd.generation()


def local_rank():
    """This worker's rank among the job's workers on its host."""
    return _horovodd.local_rank()


def local_size():
    """The job's workers on this worker's host."""
    return _horovodd.local_size()


def cross_rank():
    """Index of this worker's host among the hosts that have its local rank."""
    return _horovodd.cross_rank()


def cross_size():
    """Hosts that have this worker's local rank."""
    return _horovodd.cross_size()


def is_homogeneous():
    """Whether every host runs the same number of workers (False before
    init(), as Horovod's). Answered locally (no collective, as in Horovod):
    with L workers on every one of H hosts, each worker's local_size() *
    cross_size() is L * H = size()."""
    if not is_initialized():
        return False
    return local_size() * cross_size() == size()


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a Chrome trace (chrome://tracing, Perfetto) of the
    collectives to `file_path` (rank 0 writes it), as HOROVOD_TIMELINE does.
    mark_cycles: also mark each engine cycle."""
    _horovodd.start_timeline(str(file_path), bool(mark_cycles))


def stop_timeline():
    """Stops the timeline started by start_timeline() (or HOROVOD_TIMELINE)."""
    _horovodd.stop_timeline()


# What this build has, as Horovod's build-info functions say it, with their
# types: nccl_built() an int, the others bools. horovodd runs its CPU
# collectives over Gloo; it never uses MPI, DDL, oneCCL or ROCm.

def mpi_threads_supported():
    """Horovod's answer when MPI is not enabled, which with horovodd it never
    is: ValueError."""
    raise ValueError("Horovod MPI is not enabled; Please make sure it's installed and enabled.")


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return True


def gloo_built():
    return True


def nccl_built():
    """NCCL's version code (NCCL_VERSION_CODE: 2.28.9 is 22809) when this
    build runs GPU collectives over NCCL, else 0, as Horovod returns it
    (scripts compare it: `hvd.nccl_built() < 2700`)."""
    return int(getattr(_build_info, "NCCL_VERSION_CODE", 0))


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return bool(getattr(_build_info, "CUDA_BUILT", False))


def rocm_built():
    return False


atexit.register(_horovodd.shutdown)
