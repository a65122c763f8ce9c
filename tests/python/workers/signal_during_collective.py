"""Rank 0 calls each named collective in turn, alone: rank 1 never enters
them. Once rank 0 is blocked in one (a watcher thread sees its main thread
stay in a call of horovodd's ops), rank 1 sends it a signal: SIGINT, or
SIGTERM, for which rank 0 installed a handler that says so and raises
SystemExit. Rank 0 prints what ended each call ("rank 0: allreduce ended
with KeyboardInterrupt") and, after the last, exits normally; rank 1 waits
for that and exits 0.

    signal_during_collective.py SIGINT|SIGTERM DIR COLLECTIVE[,COLLECTIVE...]
"""

import os
import signal
import sys
import threading
import time
from pathlib import Path

import torch

import horovod.torch as hvd

from announce import announce

DEADLINE = 120  # seconds; only for waits that would otherwise never end

COLLECTIVES = {
    "synchronize": lambda: hvd.synchronize(hvd.allreduce_async(torch.ones(4), name="lonely")),
    "allreduce": lambda: hvd.allreduce(torch.ones(4)),
    "grouped_allreduce": lambda: hvd.grouped_allreduce([torch.ones(4), torch.ones(2)]),
    "broadcast": lambda: hvd.broadcast(torch.ones(4), root_rank=0),
    "allgather": lambda: hvd.allgather(torch.ones(4)),
    "grouped_allgather": lambda: hvd.grouped_allgather([torch.ones(4), torch.ones(2)]),
    "alltoall": lambda: hvd.alltoall(torch.ones(4)),
    "reducescatter": lambda: hvd.reducescatter(torch.ones(4)),
    "grouped_reducescatter": lambda: hvd.grouped_reducescatter([torch.ones(4), torch.ones(2)]),
    "barrier": lambda: hvd.barrier(),
}


def blocked_in_ops(main_ident):
    """Whether the main thread's innermost Python frame is in horovodd's ops
    (so it is inside one of their calls into the runtime), at one place."""
    frame = sys._current_frames().get(main_ident)
    if frame is None or not frame.f_code.co_filename.endswith(os.path.join("horovodd", "ops.py")):
        return None
    return (frame.f_code, frame.f_lasti)


def watch(shared, names, main_ident, next_call):
    """For each call: once the main thread has stayed at one place in ops for
    a second, writes blocked-<name> for rank 1 to see."""
    for name in names:
        next_call[name].wait(DEADLINE)
        place, since = None, time.monotonic()
        while True:
            now_place = blocked_in_ops(main_ident)
            if now_place is None or now_place != place:
                place, since = now_place, time.monotonic()
            elif time.monotonic() - since >= 1.0:
                break
            time.sleep(0.05)
        (shared / f"blocked-{name}").write_text("blocked")


def rank0(signal_name, shared, names):
    if signal_name == "SIGTERM":
        def on_sigterm(signum, frame):
            print("rank 0: SIGTERM handler ran", flush=True)
            raise SystemExit("SIGTERM")
        signal.signal(signal.SIGTERM, on_sigterm)
    next_call = {name: threading.Event() for name in names}
    threading.Thread(target=watch, args=(shared, names, threading.main_thread().ident, next_call),
                     daemon=True).start()
    for name in names:
        next_call[name].set()
        try:
            COLLECTIVES[name]()
            outcome = "returned"
        except (KeyboardInterrupt, SystemExit) as interrupt:
            outcome = type(interrupt).__name__
        except Exception as error:  # the collective's own error: not what is tested
            outcome = f"{type(error).__name__}: {error}"
        print(f"rank 0: {name} ended with {outcome}", flush=True)
    print("rank 0: exiting", flush=True)


def rank1(signal_name, shared, names, pid0):
    deadline = time.monotonic() + DEADLINE * len(names)
    for name in names:
        while not (shared / f"blocked-{name}").exists():
            assert time.monotonic() < deadline, f"rank 0 never blocked in {name}"
            time.sleep(0.05)
        os.kill(pid0, getattr(signal, signal_name))
    while True:
        try:
            os.kill(pid0, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "rank 0 did not exit"
        time.sleep(0.05)
    print("rank 1: saw rank 0 exit", flush=True)


def main(signal_name, shared, names):
    hvd.init()
    announce(hvd)
    pids = hvd.allgather(torch.tensor([os.getpid()], dtype=torch.int64))
    if hvd.rank() == 0:
        rank0(signal_name, shared, names)
    else:
        rank1(signal_name, shared, names, int(pids[0]))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(","))
