#!/usr/bin/env python3
"""pytorch_elastic_train: the PyTorch elastic example. A small MLP learns a
synthetic classification task (Gaussian clusters from a fixed seed, no
downloads) data-parallel on however many workers horovodd gives it at any
moment, with Horovod's elastic API:

    build/bin/horovodrun -np 2 --min-np 2 --max-np 4 \\
        --host-discovery-script examples/discover_hosts.sh \\
        /usr/bin/python3 examples/pytorch_elastic_train.py --output result.json

(with PYTHONPATH=build/python, and hosts.txt in the current directory).

It reaches an accuracy of at least 0.9 on held-out data with the defaults.
Rank 0 writes a JSON result for --output: epochs_completed,
samples_per_epoch (samples trained on, repeats included) and
distinct_samples_per_epoch (both equal --samples when every sample was
trained on exactly once, across any membership changes), resets,
final_size, accuracy, steps. Exits 0 when training finished.
"""

import argparse
import json
import os
import sys
import time

import torch

import horovodd.torch as hvd

FEATURES = 16
CLASSES = 4
HIDDEN = 32


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=4, help="passes over the data set")
    parser.add_argument("--samples", type=int, default=2048, help="size of the training set")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--lr", type=float, default=0.05,
                        help="learning rate per worker (scaled by the number of workers)")
    parser.add_argument("--commit-every", type=int, default=1, help="steps between commits")
    parser.add_argument("--seed", type=int, default=1, help="seed of the data and the model")
    parser.add_argument("--step-delay-ms", type=float, default=0,
                        help="sleep per step, so that membership can change mid-run")
    parser.add_argument("--output", help="rank 0 writes the result JSON here")
    args = parser.parse_args(argv)
    for flag in ("epochs", "samples", "batch_size", "commit_every"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1, "
                         f"got {getattr(args, flag)}")
    return args


def make_data(seed, samples):
    """Well-separated Gaussian clusters, one per class. Training and test
    sets share the cluster centres (from `seed`) and differ in the draws."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, FEATURES, generator=generator)

    def draw(count):
        labels = torch.randint(0, CLASSES, (count,), generator=generator)
        points = centres[labels] + torch.randn(count, FEATURES, generator=generator)
        return points, labels

    return draw(samples), draw(samples // 2)


def accuracy(model, points, labels):
    with torch.no_grad():
        return (model(points).argmax(dim=1) == labels).float().mean().item()


def print_membership():
    # The line tests and demos look for to follow membership and find PIDs.
    print(f"rank {hvd.rank()}/{hvd.size()} generation {hvd.generation()} pid {os.getpid()}",
          flush=True)


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)  # several workers share each host's cores
    hvd.init()

    (train_x, train_y), (test_x, test_y) = make_data(args.seed, args.samples)
    indices = torch.arange(args.samples)
    dataset = torch.utils.data.TensorDataset(train_x, train_y, indices)
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    # `seen` counts how often each sample was trained on this epoch; it is
    # committed with the model, so it is exactly as far along as the sampler.
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, steps=0,
                                   seen=torch.zeros(args.samples, dtype=torch.int64),
                                   samples_per_epoch=[], distinct_samples_per_epoch=[])

    def scale_learning_rate():
        # Horovod's rule: the learning rate grows with the global batch.
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()

    state.register_reset_callbacks([scale_learning_rate])

    @hvd.elastic.run
    def train(state):
        print_membership()
        while state.epoch < args.epochs:
            for batch, (x, y, index) in enumerate(loader):
                # Padding (repeats that even out the ranks' shares) comes last
                # in a batch and is left out of the loss and the count.
                real = len(state.sampler.get_indices(batch, args.batch_size))
                trained = hvd.allgather(index[:real])
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x[:real]), y[:real],
                                                         reduction="sum")
                # DistributedOptimizer averages over ranks: this makes the
                # step the mean gradient over the whole global batch.
                (loss * hvd.size() / len(trained)).backward()
                optimizer.step()
                state.seen += torch.bincount(trained, minlength=args.samples)
                state.steps += 1
                state.sampler.record_batch(batch, args.batch_size)
                if args.step_delay_ms > 0:
                    time.sleep(args.step_delay_ms / 1000)
                if (batch + 1) % args.commit_every == 0:
                    state.commit()
            state.samples_per_epoch.append(int(state.seen.sum()))
            state.distinct_samples_per_epoch.append(int((state.seen > 0).sum()))
            if hvd.rank() == 0:
                print(f"epoch {state.epoch + 1}/{args.epochs} accuracy "
                      f"{accuracy(model, test_x, test_y):.4f} size {hvd.size()}", flush=True)
            state.epoch += 1
            state.seen = torch.zeros(args.samples, dtype=torch.int64)
            state.sampler.set_epoch(state.epoch)
            state.commit()

    train(state)

    if hvd.rank() == 0 and args.output:
        result = {
            "epochs_completed": state.epoch,
            "samples_per_epoch": state.samples_per_epoch,
            "distinct_samples_per_epoch": state.distinct_samples_per_epoch,
            "resets": state.resets,
            "final_size": hvd.size(),
            "accuracy": accuracy(model, test_x, test_y),
            "steps": state.steps,
        }
        temporary = args.output + ".tmp"
        with open(temporary, "w") as f:
            json.dump(result, f)
        os.replace(temporary, args.output)  # readers never see half a result
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
