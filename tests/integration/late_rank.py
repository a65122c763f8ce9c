#!/usr/bin/env python3
"""late_rank: a 2-rank PyTorch job in which rank 1 is late for an allreduce.
test_rank_activity.py runs it under horovodrun --daemon.

Both ranks allreduce "warmup" and commit an elastic state a few times; then
rank 0 enters the allreduce "rank1.is.late" while rank 1 waits for the file
RELEASE (the test creates it once it has seen rank 0 waiting; after 600 s
rank 1 goes on regardless). Both then allreduce "after" a few times and
stay until the file DONE exists, so the test reads their final counts.
Every rank prints "late_rank rank R pid P" first."""

import os
import sys
import time

import torch

import horovodd.torch as hvd

release, done = sys.argv[1], sys.argv[2]
hvd.init()
print(f"late_rank rank {hvd.rank()} pid {os.getpid()}", flush=True)
state = hvd.elastic.ObjectState(step=0)
t = torch.ones(4)
for step in range(3):
    hvd.allreduce(t, name="warmup")
    state.step = step
    state.commit()

if hvd.rank() == 1:
    deadline = time.monotonic() + 600
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.1)
hvd.allreduce(t, name="rank1.is.late")
for step in range(3):
    hvd.allreduce(t, name="after")
    state.commit()
print(f"late_rank rank {hvd.rank()} finished", flush=True)
while not os.path.exists(done):
    time.sleep(0.1)
