#!/usr/bin/env python3
"""stall_recovery: how long horovodd takes to name a hung rank and to turn the hang into a
reset, beside what Horovod 0.28 and torchrun do with the same hang.

A 4-rank elastic PyTorch job (tests/integration/stall_probe.py) on two host names of this
machine; rank 1 sleeps an hour inside a step while its heartbeat thread runs. The script reads
horovodrun's --verbose output as it comes (each line stamped on arrival) and prints:
  detection  from the hang to the daemon's "stall:" event (the stall warning time plus the
             detector's delay),
  eviction   from the hang to the culprit's SIGTERM (the shutdown time),
  recovery   from the hang to training resumed at the smaller size (re-entry of the training
             function on every survivor).
and beside them what the peers would do: Horovod warns after --stall-check-warning-time-seconds
(60) from each waiting rank, naming every other rank, then hangs for good (or, with a shutdown
time, fails the waiting ranks, whose hosts are blacklisted, and keeps the hung one); torchrun
waits for the collective timeout (30 min by default for NCCL and gloo), then every rank fails
and every worker restarts from the last checkpoint.

A program, not a test: ctest and CI never run it.

    bench/stall_recovery.py [--build build] [--warning 5] [--shutdown 10]
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "integration" / "stall_probe.py"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--warning", type=int, default=5)
    parser.add_argument("--shutdown", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    build = Path(args.build)
    lines = []  # (arrival, text)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(build / "python"))
        command = [str(build / "bin" / "horovodrun"), "--verbose", "-np", "4", "--min-np", "2",
                   "-H", "localhost:2,127.0.0.1:2", "--start-timeout", "120",
                   "--stall-check-warning-time-seconds", str(args.warning),
                   "--stall-check-shutdown-time-seconds", str(args.shutdown),
                   sys.executable, str(PROBE), "--marker-dir", tmp, "--samples", "512",
                   "--epochs", "2", "--sleep", "1:8:3600"]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, cwd=tmp, start_new_session=True)

        def read():
            for line in proc.stdout:
                lines.append((time.monotonic(), line.rstrip("\n")))
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        reader.join(5)

    def first(pattern, after=0.0):
        regex = re.compile(pattern)
        return next((t for t, text in lines if t >= after and regex.search(text)), None)

    hung = first(r"stall_probe sleeping rank=1")
    named = first(r"horovodrun: stall: ")
    evicted = first(r" evicted: ")
    resumed = None
    if evicted is not None:
        entries = [t for t, text in lines if t > evicted and "stall_probe enter" in text]
        resumed = entries[1] if len(entries) >= 2 else None  # both survivors re-entered
    if hung is None or named is None:
        print("\n".join(text for _, text in lines[-40:]))
        print(f"stall_recovery: no hang or no detection (exit {code})")
        return 1

    def since(t):
        return f"{t - hung:8.2f} s" if t is not None else "       -"

    print(f"hung rank 1 of 4; --stall-check-warning-time-seconds {args.warning}, "
          f"--stall-check-shutdown-time-seconds {args.shutdown}; job exit {code}")
    print(f"{'':22}{'horovodd':>12}  {'Horovod 0.28':>28}  {'torchrun':>24}")
    print(f"{'culprit named':22}{since(named):>12}  {'never (warns at 60 s)':>28}  "
          f"{'never':>24}")
    print(f"{'hang ended':22}{since(evicted):>12}  {'never, or innocents at S':>28}  "
          f"{'1800 s (all ranks fail)':>24}")
    print(f"{'training resumed':22}{since(resumed):>12}  {'never':>28}  "
          f"{'1800 s + full restart':>24}")
    print(f"detection delay past the warning time: {named - hung - args.warning:.2f} s "
          f"(the hang begins just before the step's collective)")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
