"""Horovod's elastic PyTorch synthetic benchmark, as a Horovod script running
unchanged under horovodd (`import horovod.torch as hvd`).

    horovodrun -np 2 --min-np 1 --max-np 4 --host-discovery-script ./discover.sh \
        python3 pytorch_synthetic_benchmark_elastic.py --model resnet18

The benchmark state (model, optimizer, batch counter) is committed every
--batches-per-commit batches; after a membership change hvd.elastic.run
syncs it from a surviving worker and goes on.
"""

import argparse
import timeit

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models

import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch elastic synthetic benchmark",
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
parser.add_argument("--batches-per-commit", type=int, default=1,
                    help="number of batches processed before calling `state.commit()`")

args = parser.parse_args()

hvd.init()
torch.manual_seed(1234)
torch.set_num_threads(1)

model = getattr(models, args.model)(num_classes=10)
lr_scaler = hvd.size()
optimizer = optim.SGD(model.parameters(), lr=0.01 * lr_scaler)
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression)

data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
target = torch.LongTensor(args.batch_size).random_() % 10


def log(s):
    if hvd.rank() == 0:
        print(s, flush=True)


@hvd.elastic.run
def run_benchmark(state):
    def benchmark_step():
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        state.batch += 1
        if state.batch % args.batches_per_commit == 0:
            state.commit()

    if not state.warm:
        log("Running warmup...")
        timeit.timeit(benchmark_step, number=args.num_warmup_batches)
        state.warm = True
        state.commit()

    if state.iter == 0:
        log("Running benchmark...")
    for x in range(state.iter, args.num_iters):
        time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log(f"Iter #{x}: {img_sec:.1f} img/sec per CPU")
        state.img_secs.append(img_sec)
        state.iter = x + 1
        state.commit()


def on_state_reset():
    # Horovod: scale the learning rate to the new number of workers.
    for param_group in optimizer.param_groups:
        param_group["lr"] = 0.01 * hvd.size()


state = hvd.elastic.TorchState(model, optimizer, img_secs=[], iter=0, batch=0, warm=False)
state.register_reset_callbacks([on_state_reset])
run_benchmark(state)

img_sec_mean = np.mean(state.img_secs)
img_sec_conf = 1.96 * np.std(state.img_secs)
log(f"Img/sec per CPU: {img_sec_mean:.1f} +-{img_sec_conf:.1f}")
log(f"Total img/sec on {hvd.size()} CPU(s): {hvd.size() * img_sec_mean:.1f} "
    f"+-{hvd.size() * img_sec_conf:.1f}")
log(f"batches: {state.batch}")
