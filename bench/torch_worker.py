"""The torchrun peer of the reset benchmark: a tiny torch.distributed (gloo)
job that does what bench_hvdd_worker's elastic mode does (2 ms of "compute",
one allreduce of 1024 floats per step) and logs each completed step with its
wall-clock time to DIR/w-<pid>.log. torchrun restarts the whole group after a
worker dies (--max-restarts); bench.py times kill -> first step of the
restarted group. Stops when DIR/stop exists."""
import os
import sys
import time

import torch
import torch.distributed as dist


def main() -> int:
    out_dir = sys.argv[1]
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    grad = torch.ones(1024)
    stop_path = os.path.join(out_dir, "stop")
    step = 0
    with open(os.path.join(out_dir, f"w-{os.getpid()}.log"), "w") as log:
        while True:
            time.sleep(0.002)
            dist.all_reduce(grad)
            grad.fill_(1.0)
            step += 1
            log.write(f"STEP t={time.time():.6f} rank={rank} size={size} "
                      f"gen={restart} step={step}\n")
            log.flush()
            if step % 10 == 0:
                flag = torch.tensor([1.0 if os.path.exists(stop_path) else 0.0])
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                if flag.item() > 0:
                    break
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
