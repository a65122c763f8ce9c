#!/usr/bin/env python3
"""stall_probe: a PyTorch elastic job with a rank that hangs or lags on
purpose, for test_stall.py and bench/stall_recovery.py. It trains like
examples/pytorch_elastic_train.py (an ElasticSampler over SAMPLES indices; the
count of each sample trained on is committed with the model), and rank 0
writes a JSON result for --output: epochs_completed, samples_per_epoch,
distinct_samples_per_epoch, final_size.

--sleep RANK:STEP:SECONDS: the worker that has rank RANK at global step STEP
sleeps SECONDS inside that step, before its first collective, while its
heartbeat thread goes on (once per job: a marker file in --marker-dir, whose
content is the sleeper's pid and host).
--slow SPAWN_RANK:MS: the worker started as rank SPAWN_RANK sleeps MS more in
every step (a straggler; the others wait for it in the step's collectives).
Every worker prints "stall_probe enter rank=R size=N spawn_rank=S pid=P
host=H" each time it enters the training function.
"""

import argparse
import json
import os
import socket
import sys
import time

import torch

import horovodd.torch as hvd

HOST = os.environ.get("HOROVOD_HOSTNAME", socket.gethostname())
SPAWN_RANK = int(os.environ.get("HOROVOD_RANK", "-1"))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--step-delay-ms", type=float, default=20)
    parser.add_argument("--sleep", action="append", default=[], metavar="RANK:STEP:SECONDS")
    parser.add_argument("--slow", metavar="SPAWN_RANK:MS")
    parser.add_argument("--marker-dir", default=".")
    parser.add_argument("--output")
    args = parser.parse_args(argv)
    args.sleeps = [tuple(float(x) if i == 2 else int(x) for i, x in enumerate(s.split(":")))
                   for s in args.sleep]
    args.slow_rank, args.slow_ms = (None, 0.0)
    if args.slow:
        rank, ms = args.slow.split(":")
        args.slow_rank, args.slow_ms = int(rank), float(ms)
    return args


def first_to(marker_dir, name, content):
    path = os.path.join(marker_dir, name)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, content.encode())
    os.close(fd)
    return True


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)
    hvd.init()
    generator = torch.Generator().manual_seed(1)
    points = torch.randn(args.samples, 8, generator=generator)
    labels = torch.randint(0, 2, (args.samples,), generator=generator)
    indices = torch.arange(args.samples)
    dataset = torch.utils.data.TensorDataset(points, labels, indices)
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    torch.manual_seed(1)
    model = torch.nn.Linear(8, 2)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, steps=0,
                                   seen=torch.zeros(args.samples, dtype=torch.int64),
                                   samples_per_epoch=[], distinct_samples_per_epoch=[])

    @hvd.elastic.run
    def train(state):
        print(f"stall_probe enter rank={hvd.rank()} size={hvd.size()} spawn_rank={SPAWN_RANK} "
              f"pid={os.getpid()} host={HOST}", flush=True)
        while state.epoch < args.epochs:
            for batch, (x, y, index) in enumerate(loader):
                for rank, step, seconds in args.sleeps:
                    if (rank, step) == (hvd.rank(), state.steps) and first_to(
                            args.marker_dir, f"slept-{rank}-{step}", f"{os.getpid()} {HOST}"):
                        print(f"stall_probe sleeping rank={hvd.rank()} seconds={seconds} "
                              f"pid={os.getpid()}", flush=True)
                        time.sleep(seconds)
                if SPAWN_RANK == args.slow_rank:
                    time.sleep(args.slow_ms / 1000)
                real = len(state.sampler.get_indices(batch, args.batch_size))
                trained = hvd.allgather(index[:real])
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x[:real]), y[:real]).backward()
                optimizer.step()
                state.seen += torch.bincount(trained, minlength=args.samples)
                state.steps += 1
                state.sampler.record_batch(batch, args.batch_size)
                time.sleep(args.step_delay_ms / 1000)
                state.commit()
            state.samples_per_epoch.append(int(state.seen.sum()))
            state.distinct_samples_per_epoch.append(int((state.seen > 0).sum()))
            state.epoch += 1
            state.seen = torch.zeros(args.samples, dtype=torch.int64)
            state.sampler.set_epoch(state.epoch)
            state.commit()

    train(state)
    if hvd.rank() == 0 and args.output:
        result = {"epochs_completed": state.epoch, "samples_per_epoch": state.samples_per_epoch,
                  "distinct_samples_per_epoch": state.distinct_samples_per_epoch,
                  "final_size": hvd.size(), "steps": state.steps}
        with open(args.output + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(args.output + ".tmp", args.output)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
