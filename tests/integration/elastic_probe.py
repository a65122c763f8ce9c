#!/usr/bin/env python3
"""elastic_probe: a small PyTorch elastic job that says what a Horovod user
checks. test_horovod_elastic.py runs it under horovodrun.

Every rank prints, each time the training function is entered,
    probe enter rank=R size=N host=H spawn_rank=S entries=K pid=P
and rank 0 prints, at the end of each epoch,
    probe epoch=E batch=B commits=C host=H spawn_rank=S rank=R size=N entries=K
(host: HOROVOD_HOSTNAME; spawn_rank: HOROVOD_RANK when the process started;
entries: how many times this process entered the training function).

--fail WHO:EPOCH:BATCH:HOW makes a worker fail when it reaches batch BATCH of
epoch EPOCH (from 0): WHO is a rank (the worker that has it then), @HOST (a
worker on HOST) or * (every worker, every time); HOW is "raise" (an exception
out of hvd.elastic.run, so the process exits 1) or "kill" (SIGKILL to
itself). A rank or @HOST entry fires once per job (a marker file in
--marker-dir), so the worker that takes the rank over after the reset goes on.

With --stop-file, training goes on past --epochs until that file exists (rank
0 looks, at the end of an epoch, and tells the others), so a test can change
hosts at its own pace.
"""

import argparse
import os
import signal
import sys
import time

import torch

import horovodd.torch as hvd

HOST = os.environ.get("HOROVOD_HOSTNAME", "?")
SPAWN_RANK = os.environ.get("HOROVOD_RANK", "?")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batches", type=int, default=4, help="batches per epoch")
    parser.add_argument("--step-delay-ms", type=float, default=50)
    parser.add_argument("--fail", action="append", default=[], metavar="WHO:EPOCH:BATCH:HOW")
    parser.add_argument("--marker-dir", default=".")
    parser.add_argument("--stop-file")
    args = parser.parse_args(argv)
    schedule = []
    for entry in args.fail:
        who, epoch, batch, how = entry.split(":")
        if how not in ("raise", "kill"):
            parser.error(f"--fail {entry}: HOW must be raise or kill")
        schedule.append((who, int(epoch), int(batch), how, entry))
    args.schedule = schedule
    return args


def fire_once(marker_dir, entry):
    """True for the first worker of the job to get here for `entry`."""
    name = os.path.join(marker_dir, "fired-" + entry.replace(":", "_"))
    try:
        os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def chosen(who, marker_dir, entry):
    if who == "*":
        return True
    if who.startswith("@"):
        mine = who[1:] == HOST
    else:
        mine = int(who) == hvd.rank()
    return mine and fire_once(marker_dir, entry)


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    x, y = torch.ones(8, 4), torch.zeros(8, 1)
    entries = 0

    @hvd.elastic.run
    def train(state):
        nonlocal entries
        entries += 1
        print(f"probe enter rank={hvd.rank()} size={hvd.size()} host={HOST} "
              f"spawn_rank={SPAWN_RANK} entries={entries} pid={os.getpid()}", flush=True)
        while True:
            while state.batch < args.batches:
                for who, epoch, batch, how, entry in args.schedule:
                    if (epoch, batch) == (state.epoch, state.batch) and \
                            chosen(who, args.marker_dir, entry):
                        print(f"probe failing rank={hvd.rank()} how={how} host={HOST}",
                              flush=True)
                        if how == "kill":
                            os.kill(os.getpid(), signal.SIGKILL)
                        raise RuntimeError(f"scheduled failure {entry}")
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
                time.sleep(args.step_delay_ms / 1000)
                state.batch += 1
                state.commit()
            if hvd.rank() == 0:
                print(f"probe epoch={state.epoch} batch={state.batch} commits={state.commits} "
                      f"host={HOST} spawn_rank={SPAWN_RANK} rank={hvd.rank()} "
                      f"size={hvd.size()} entries={entries}", flush=True)
            state.epoch += 1
            state.batch = 0
            if state.epoch >= args.epochs:
                stop = args.stop_file is None or (hvd.rank() == 0 and
                                                  os.path.exists(args.stop_file))
                if hvd.broadcast_object(stop, 0):
                    break
            state.commit()

    train(state)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
