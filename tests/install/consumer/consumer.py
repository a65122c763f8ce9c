"""The installed Python package's smoke program (tests/integration/test_install.py):
allreduces (rank + 1) with a sum over numpy and prints
  py-consumer rank R/S sum X pid P from FILE
FILE being where the horovodd package was imported from."""

import os

import numpy as np

import horovodd as hvd

hvd.init()
total = hvd.allreduce(np.array([hvd.rank() + 1.0]), op=hvd.Sum, name="sum")
print(f"py-consumer rank {hvd.rank()}/{hvd.size()} sum {float(total[0]):g} "
      f"pid {os.getpid()} from {hvd.__file__}", flush=True)
hvd.shutdown()
