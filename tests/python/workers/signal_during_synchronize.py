"""Rank 0 waits in synchronize() on an allreduce rank 1 never makes; rank 1
then sends rank 0 a signal (SIGINT, or SIGTERM with a handler that raises
SystemExit). Rank 0 prints what ended its wait ("rank 0: synchronize ended
with KeyboardInterrupt") and exits; rank 1 waits for that and exits 0.

    signal_during_synchronize.py SIGINT|SIGTERM DIR
"""

import os
import signal
import sys
import time
from pathlib import Path

import torch

import horovod.torch as hvd

from announce import announce

DEADLINE = 120  # seconds; only for waits that would otherwise never end


def main(signal_name, shared):
    hvd.init()
    announce(hvd)
    flag = shared / "rank0-waiting"
    pids = hvd.allgather(torch.tensor([os.getpid()], dtype=torch.int64))
    if hvd.rank() == 0:
        if signal_name == "SIGTERM":
            def on_sigterm(signum, frame):
                raise SystemExit("SIGTERM")
            signal.signal(signal.SIGTERM, on_sigterm)
        handle = hvd.allreduce_async(torch.ones(4), name="never.matched")
        flag.write_text("waiting")
        try:
            hvd.synchronize(handle)
            outcome = "synchronize returned"
        except (KeyboardInterrupt, SystemExit) as interrupt:
            outcome = type(interrupt).__name__
        except Exception as error:  # the collective's own error: not what is tested
            outcome = f"{type(error).__name__}: {error}"
        print(f"rank 0: synchronize ended with {outcome}", flush=True)
        os._exit(0)  # the peer never matches the request; leave without a goodbye
    deadline = time.monotonic() + DEADLINE
    while not flag.exists():
        assert time.monotonic() < deadline, "rank 0 never started waiting"
        time.sleep(0.05)
    time.sleep(0.3)  # let rank 0 enter its wait; the test passes either way
    os.kill(int(pids[0]), getattr(signal, signal_name))
    while True:
        try:
            os.kill(int(pids[0]), 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "rank 0 did not exit"
        time.sleep(0.05)
    print("rank 1: saw rank 0 exit", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
