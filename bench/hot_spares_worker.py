#!/usr/bin/env python3
"""One worker of bench/hot_spares.py: an elastic PyTorch job (a small MLP, SGD, one commit a
step). Rank 0 prints, after every step,
    STEP t=<unix time> size=<size> resets=<resets seen> step=<step>
--init-delay S sleeps S seconds before hvd.init(), as a worker setting up CUDA and a real
model would (a hot spare has done it before it is needed)."""

import argparse
import sys
import time

import torch

import horovodd.torch as hvd


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--step-delay-ms", type=float, default=20)
    parser.add_argument("--init-delay", type=float, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    time.sleep(args.init_delay)
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, step=0)
    resets = [0]
    state.register_reset_callbacks([lambda: resets.__setitem__(0, resets[0] + 1)])
    x, y = torch.randn(32, 64), torch.zeros(32, 1)

    @hvd.elastic.run
    def train(state):
        while state.step < args.steps:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            time.sleep(args.step_delay_ms / 1000)
            state.step += 1
            state.commit()
            if hvd.rank() == 0:
                print(f"STEP t={time.time():.6f} size={hvd.size()} resets={resets[0]} "
                      f"step={state.step}", flush=True)

    train(state)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
