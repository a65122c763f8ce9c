"""Horovod's PyTorch synthetic benchmark, as a Horovod script: it runs
unchanged under horovodd's horovodrun (`import horovod.torch as hvd`).

    horovodrun -np 2 -H localhost:2 python3 pytorch_synthetic_benchmark.py \
        --model resnet18 --batch-size 8

Trains a torchvision model on random images and reports images/sec per
worker and in total.
"""

import argparse
import timeit

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed
from torchvision import models

import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch synthetic benchmark",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--model", type=str, default="resnet50", help="torchvision model to test")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
parser.add_argument("--image-size", type=int, default=224, help="input image side")
parser.add_argument("--num-warmup-batches", type=int, default=10,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=10,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")
parser.add_argument("--use-adasum", action="store_true", default=False,
                    help="use adasum algorithm to do reduction")
parser.add_argument("--num-proc", type=int, help="unused here (Horovod's Ray/Spark launcher)")

args = parser.parse_args()

hvd.init()
torch.manual_seed(1234)
torch.set_num_threads(1)

model = getattr(models, args.model)(num_classes=10)

# Adasum does not scale the learning rate with the number of workers.
lr_scaler = 1 if args.use_adasum else hvd.size()
optimizer = optim.SGD(model.parameters(), lr=0.01 * lr_scaler)

compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression,
                                     op=hvd.Adasum if args.use_adasum else hvd.Average)

# Every worker starts from rank 0's weights and optimizer state.
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
target = torch.LongTensor(args.batch_size).random_() % 10


def benchmark_step():
    optimizer.zero_grad()
    output = model(data)
    loss = F.cross_entropy(output, target)
    loss.backward()
    optimizer.step()


def log(s, nl=True):
    if hvd.rank() != 0:
        return
    print(s, end="\n" if nl else "", flush=True)


log(f"Model: {args.model}")
log(f"Batch size: {args.batch_size}")
log(f"Number of CPUs: {hvd.size()}")

log("Running warmup...")
timeit.timeit(benchmark_step, number=args.num_warmup_batches)

log("Running benchmark...")
img_secs = []
for x in range(args.num_iters):
    time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
    img_sec = args.batch_size * args.num_batches_per_iter / time
    log(f"Iter #{x}: {img_sec:.1f} img/sec per CPU")
    img_secs.append(img_sec)

img_sec_mean = np.mean(img_secs)
img_sec_conf = 1.96 * np.std(img_secs)
log(f"Img/sec per CPU: {img_sec_mean:.1f} +-{img_sec_conf:.1f}")
log(f"Total img/sec on {hvd.size()} CPU(s): {hvd.size() * img_sec_mean:.1f} "
    f"+-{hvd.size() * img_sec_conf:.1f}")

# Every worker ends with the same weights.
weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
gathered = hvd.allgather(weights.unsqueeze(0))
if hvd.rank() == 0:
    same = all(torch.equal(gathered[0], row) for row in gathered)
    print(f"weights identical on every worker: {same}", flush=True)
