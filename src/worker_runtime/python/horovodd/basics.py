"""Joining and leaving the job, and this worker's place in it."""

import atexit
import sys

from horovodd import _horovodd


def flush_std_streams():
    """Flushes Python's stdout and stderr. The runtime ends a worker the daemon
    removed from the job with exit(0) from C++, which skips Python's own
    flushing, so this runs before every call that may do so."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def init():
    """Joins the job that launched this process and builds the rings.

    Idempotent. Raises RuntimeError when the process was not started by
    horovodrun (the message names the missing environment variable). A worker
    the job no longer needs exits here with status 0."""
    flush_std_streams()
    _horovodd.init()


def shutdown():
    """Leaves the job's rings and closes the daemon connection. Idempotent;
    also runs at interpreter exit."""
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


atexit.register(_horovodd.shutdown)
