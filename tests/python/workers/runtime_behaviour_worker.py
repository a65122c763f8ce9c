"""Runs under horovodrun with 2 workers (numpy only, no torch): how blocking
collectives behave towards the rest of the Python process.

  gil DIR        rank 0's other threads run while it waits in a barrier
                 (rank 1 enters the barrier only once one of them did).
  sigint DIR     a SIGINT that arrives while rank 0 waits in a barrier rank 1
                 never enters raises KeyboardInterrupt there (once the
                 barrier gives up at the ring timeout), not a hang and not
                 the barrier's own error.
  lost-peer DIR  rank 1 dies; rank 0's next collective raises
                 HorovodInternalError, and hvd.elastic.run carries on alone
                 (run it as an elastic job with --min-np 1).
  lost-peer-async DIR  the same with requests queued on the engine: every
                 pending handle's synchronize raises HorovodInternalError.

Each rank prints "rank R: <outcome>"; the test reads those lines. DIR is a
directory both ranks share for handshakes."""

import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

import horovodd as hvd

from announce import announce

DEADLINE = 120  # seconds; only for waits that would otherwise never end


def wait_for(condition, what):
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def report(outcome):
    print(f"rank {hvd.rank()}: {outcome}", flush=True)


def enter_barrier_announcing(flag):
    """Enters a barrier; a helper thread writes `flag` as soon as it gets the
    GIL. The thread is woken just before the barrier and the switch interval
    is huge, so it gets the GIL only if the barrier releases it."""
    woken = threading.Event()

    def write_flag():
        woken.wait()
        flag.write_text("inside")

    threading.Thread(target=write_flag, daemon=True).start()
    sys.setswitchinterval(1000)
    woken.set()
    hvd.barrier()


def gil(shared):
    flag = shared / "rank0-thread-ran"
    if hvd.rank() == 0:
        enter_barrier_announcing(flag)
    else:
        wait_for(flag.exists, "rank 0's thread to run while rank 0 is in the barrier")
        hvd.barrier()
    report("barrier done")


def sigint(shared):
    flag = shared / "rank0-in-barrier"
    pids = hvd.allgather(np.array([os.getpid()], dtype=np.int64))
    if hvd.rank() == 0:
        try:
            enter_barrier_announcing(flag)
            outcome = "barrier returned"
        except KeyboardInterrupt:
            outcome = "KeyboardInterrupt"
        except Exception as error:  # the barrier's own error, reported as wrong
            outcome = f"{type(error).__name__}: {error}"
        report(f"barrier ended with {outcome}")
        os._exit(0)  # the ring is dead; leave without a goodbye
    wait_for(flag.exists, "rank 0 to enter the barrier")
    os.kill(int(pids[0]), signal.SIGINT)

    def rank0_gone():
        try:
            os.kill(int(pids[0]), 0)
            return False
        except ProcessLookupError:
            return True

    wait_for(rank0_gone, "rank 0 to exit")
    report("saw rank 0 exit")
    os._exit(0)


def lost_peer(shared):
    @hvd.elastic.run
    def step(state):
        if hvd.size() == 2:
            hvd.barrier()
            if hvd.rank() == 1:
                os._exit(7)
            try:
                hvd.allreduce(np.ones(4), op=hvd.Sum)
            except hvd.HorovodInternalError as error:
                report(f"HorovodInternalError: {error}")
                raise
            report("allreduce returned")
        report(f"resumed at size {hvd.size()}")

    step(hvd.elastic.ObjectState())


def lost_peer_async(shared):
    @hvd.elastic.run
    def step(state):
        if hvd.size() == 2:
            hvd.barrier()
            if hvd.rank() == 1:
                os._exit(7)
            handles = [hvd.allreduce_async_(np.ones(4), name=f"pending.{i}", op=hvd.Sum)
                       for i in range(3)]
            failures = []
            for handle in handles:
                try:
                    hvd.synchronize(handle)
                except hvd.HorovodInternalError as error:
                    failures.append(error)
            report(f"{len(failures)} of 3 handles raised HorovodInternalError")
            if failures:
                raise failures[0]
            report("allreduce returned")
        total = hvd.synchronize(hvd.allreduce_async(np.ones(4), name="after", op=hvd.Sum))
        report(f"resumed at size {hvd.size()}, sum {total[0]:.0f}")

    step(hvd.elastic.ObjectState())


CASES = {"gil": gil, "sigint": sigint, "lost-peer": lost_peer,
         "lost-peer-async": lost_peer_async}


def main(argv):
    case, shared = CASES[argv[0]], Path(argv[1])
    hvd.init()
    announce(hvd)
    assert hvd.size() == 2, hvd.size()
    case(shared)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
