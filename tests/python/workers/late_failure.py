"""A job whose last rank fails after the work is done, before the others
exit: the daemon plans a reset without it, and the other ranks then finish
without ever joining that generation (their work was complete)."""

import os
import sys
import time

import horovodd as hvd
from announce import announce

DEADLINE_S = 120


def wait_pid_gone(pid):
    # The daemon is the workers' parent: /proc/<pid> goes when it has reaped
    # the process, i.e. when it has seen the exit.
    deadline = time.monotonic() + DEADLINE_S
    while os.path.exists(f"/proc/{pid}"):
        if time.monotonic() > deadline:
            sys.exit(f"rank {hvd.rank()}: pid {pid} still there after {DEADLINE_S} s")
        time.sleep(0.05)


def main():
    hvd.init()
    announce(hvd)
    pids = hvd.allgather_object(os.getpid())
    hvd.barrier()  # the last collective: everyone's work is done
    last = hvd.size() - 1
    if hvd.rank() == last:
        print("rank failing after the work is done", flush=True)
        os._exit(3)
    wait_pid_gone(pids[last])
    hvd.shutdown()


if __name__ == "__main__":
    main()
