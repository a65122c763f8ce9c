"""Runs under horovodrun: hvd.DistributedOptimizer, broadcast_parameters and
broadcast_optimizer_state. After training on per-rank batches, every rank
must hold the same parameters, equal to what one process gets by training
the same model on the combined batch. Exits non-zero on a mismatch; prints
"optimizer ok" when everything matched."""

import sys

import torch

import horovodd.torch as hvd

from announce import announce

STEPS = 4
BATCH = 6


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(5, 8)
        self.out = torch.nn.Linear(8, 3)
        # Never used in forward(): its hook never fires, step() sends it anyway.
        self.unused = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def batch(step, rank):
    generator = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(BATCH, 5, generator=generator), torch.randn(BATCH, 3, generator=generator)


def combined_batch(step, size):
    parts = [batch(step, r) for r in range(size)]
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])


def new_model(seed):
    torch.manual_seed(seed)
    return Model()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def check_same_everywhere(model, what):
    gathered = hvd.allgather(flat(model).unsqueeze(0))
    for r in range(1, gathered.shape[0]):
        assert torch.equal(gathered[r], gathered[0]), f"{what}: rank {r} differs from rank 0"


def train_distributed(make_optimizer, passes=1, loss_scale=1.0, **options):
    rank = hvd.rank()
    model = new_model(seed=10 + rank)  # different everywhere until the broadcast
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(make_optimizer(model),
                                         named_parameters=model.named_parameters(),
                                         backward_passes_per_step=passes, **options)
    assert isinstance(optimizer, type(make_optimizer(model)))
    for step in range(STEPS):
        x, y = batch(step, rank)
        optimizer.zero_grad()
        for part in range(passes):
            rows = slice(part * BATCH // passes, (part + 1) * BATCH // passes)
            loss = torch.nn.functional.mse_loss(model(x[rows]), y[rows]) * loss_scale / passes
            loss.backward()
        optimizer.step()
    return model, optimizer


def train_alone(make_optimizer, loss_scale=1.0):
    model = new_model(seed=10)  # rank 0's initial parameters
    optimizer = make_optimizer(model)
    for step in range(STEPS):
        x, y = combined_batch(step, hvd.size())
        optimizer.zero_grad()
        (torch.nn.functional.mse_loss(model(x), y) * loss_scale).backward()
        optimizer.step()
    return model


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def adam(model):
    return torch.optim.Adam(model.parameters(), lr=0.01)


def check_matches_single_process(what, make_optimizer, tolerance=1e-5, reference_scale=1.0,
                                 **options):
    model, _ = train_distributed(make_optimizer, **options)
    check_same_everywhere(model, what)
    expected = flat(train_alone(make_optimizer, reference_scale))
    assert torch.allclose(flat(model), expected, rtol=tolerance, atol=tolerance), (
        f"{what}: parameters differ from single-process training on the combined batch by "
        f"{(flat(model) - expected).abs().max().item()}")


def check_broadcast_optimizer_state():
    rank = hvd.rank()
    model, optimizer = train_distributed(sgd)
    # Make the ranks disagree, then make them agree with rank 0 again.
    for group in optimizer.param_groups:
        group["lr"] = 0.1 + rank
    for state in optimizer.state.values():
        state["momentum_buffer"].add_(float(rank))
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert all(group["lr"] == 0.1 for group in optimizer.param_groups), optimizer.param_groups
    buffers = torch.cat([optimizer.state[p]["momentum_buffer"].reshape(-1)
                         for p in model.parameters() if p in optimizer.state])
    gathered = hvd.allgather(buffers.unsqueeze(0))
    for r in range(1, gathered.shape[0]):
        assert torch.equal(gathered[r], gathered[0]), f"momentum of rank {r} differs"


def check_misuse():
    model = new_model(seed=10)
    optimizer = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters())
    x, y = batch(0, hvd.rank())
    torch.nn.functional.mse_loss(model(x), y).backward()
    try:
        optimizer.zero_grad()
        raise AssertionError("zero_grad() between backward() and step() should raise")
    except RuntimeError as error:
        assert "zero_grad" in str(error), error
    optimizer.step()
    named = list(model.named_parameters())[1:]
    try:
        hvd.DistributedOptimizer(sgd(model), named_parameters=named)
        raise AssertionError("a parameter missing from named_parameters should raise")
    except ValueError as error:
        assert "not in named_parameters" in str(error), error


def main():
    torch.set_num_threads(1)
    hvd.init()
    announce(hvd)
    check_matches_single_process("SGD", sgd)
    check_matches_single_process("Adam", adam)
    check_matches_single_process("backward_passes_per_step=2", sgd, passes=2)
    check_matches_single_process("gradient_predivide_factor=2", sgd,
                                 gradient_predivide_factor=2.0)
    # Sum of the ranks' mean losses: size() times the combined batch's mean.
    check_matches_single_process("op=Sum", sgd, op=hvd.Sum, reference_scale=hvd.size())
    check_matches_single_process("Compression.fp16", sgd, tolerance=1e-2,
                                 compression=hvd.Compression.fp16)
    check_broadcast_optimizer_state()
    check_misuse()
    print(f"optimizer ok rank {hvd.rank()}/{hvd.size()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
