"""The torch DDP peer: torch.distributed.all_reduce on the gloo backend (what
DDP calls for CPU gradients), float32 sum, in place. bench.py starts one
process per rank with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE set.

  torch_allreduce.py allreduce|small

Same sizes, iteration counts and RESULT lines as bench_common.h
(BENCH_SIZES, BENCH_ITERS, QUICK); rank 0 prints them."""
import os
import sys
import time

import torch
import torch.distributed as dist

QUICK = os.environ.get("QUICK") == "1"


def sizes():
    only = os.environ.get("BENCH_SIZES", "")
    if only:
        return [int(b) for b in only.split(",")]
    out, b = [], 4 << 10
    while b <= 64 << 20:
        out.append(b)
        b *= 4
    return out


def iterations_for(nbytes):
    fixed = int(os.environ.get("BENCH_ITERS", "0") or 0)
    if fixed > 0:
        return fixed
    budget = (64 << 20) if QUICK else (256 << 20)
    return max(3, min(budget // nbytes, 100 if QUICK else 300))


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    if sys.argv[1] == "allreduce":
        for nbytes in sizes():
            data = torch.ones(nbytes // 4)
            iters = iterations_for(nbytes)
            for _ in range(max(1, iters // 10)):
                dist.all_reduce(data)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(data)
            per_op = (time.perf_counter() - start) / iters
            if rank == 0:
                print(f"RESULT allreduce impl=torch n={size} bytes={nbytes} iters={iters} "
                      f"seconds_per_op={per_op:.9f}", flush=True)
    else:
        steps = 20 if QUICK else 100
        tensors = [torch.ones(1024) for _ in range(100)]
        for _ in range(steps // 10 + 1):
            for t in tensors:
                dist.all_reduce(t)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps):
            for t in tensors:
                dist.all_reduce(t)
        per_step = (time.perf_counter() - start) / steps
        if rank == 0:
            print(f"RESULT small impl=torch n={size} tensors=100 floats=1024 steps={steps} "
                  f"seconds_per_step={per_step:.9f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
