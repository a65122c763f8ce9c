#!/usr/bin/python3
"""The torch DDP (gloo) peer of Horovod's synthetic benchmark
(examples/horovod/pytorch_synthetic_benchmark.py): the same torchvision model,
random images, SGD at 0.01 x ranks, batch size, warm-up and timed batches, one
thread per rank, and the same "Total img/sec" line on rank 0, so bench.py can
put the two side by side. Started once per rank by bench.py with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.
"""
import argparse
import os
import timeit

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel
from torchvision import models

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="resnet18")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--image-size", type=int, default=224)
parser.add_argument("--num-warmup-batches", type=int, default=10)
parser.add_argument("--num-batches-per-iter", type=int, default=10)
parser.add_argument("--num-iters", type=int, default=10)
args = parser.parse_args()

dist.init_process_group("gloo", rank=int(os.environ["RANK"]),
                        world_size=int(os.environ["WORLD_SIZE"]))
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(1234)
torch.set_num_threads(1)

# DDP broadcasts rank 0's weights when it wraps the model, as Horovod's
# broadcast_parameters does.
model = DistributedDataParallel(getattr(models, args.model)(num_classes=10))
optimizer = optim.SGD(model.parameters(), lr=0.01 * size)
data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
target = torch.LongTensor(args.batch_size).random_() % 10


def benchmark_step():
    optimizer.zero_grad()
    loss = F.cross_entropy(model(data), target)
    loss.backward()
    optimizer.step()


timeit.timeit(benchmark_step, number=args.num_warmup_batches)
img_secs = []
for _ in range(args.num_iters):
    seconds = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
    img_secs.append(args.batch_size * args.num_batches_per_iter / seconds)
if rank == 0:
    mean, conf = np.mean(img_secs), 1.96 * np.std(img_secs)
    print(f"Total img/sec on {size} CPU(s): {size * mean:.1f} +-{size * conf:.1f}", flush=True)
dist.destroy_process_group()
