"""The membership line every worker script prints first, in the format
tests/integration/harness.py reads ("rank R/S generation G pid P"), so a
test can find the workers' PIDs and clean them up."""

import os


def announce(hvd):
    print(f"rank {hvd.rank()}/{hvd.size()} generation {hvd.generation()} pid {os.getpid()}",
          flush=True)
