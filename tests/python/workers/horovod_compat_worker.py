"""Runs under horovodrun, written as a Horovod 0.28 script (`import
horovod.torch as hvd`): the behaviours of issue #33 that Horovod's own
test_torch.py checks, with Horovod's values, error types and messages.
Every rank can make every rank's input, so each check computes the whole
job's expected result locally; a mismatch raises at once, which ends the
job (a rank that failed an assertion and went on would leave the others
waiting in a collective it never joins).

    horovod_compat_worker.py SECTION...

Prints "compat SECTION ok rank R/S" after each section. The reduction
sections (scaling, reducescatter_async, reducescatter_fusion, join) are in
horovod_compat_ops.py, the assertions in compat_checks.py.
"""

import itertools
import os
import sys

import numpy as np
import torch

import horovod.torch as hvd

from announce import announce
from compat_checks import close, equal, raises
from horovod_compat_ops import (check_join, check_reducescatter_async, check_reducescatter_fusion,
                                check_scaling)

# The dtypes autograd takes on CPU (Horovod's tests use the first two).
GRAD_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# ---------------------------------------------------------------------------
# autograd (issue #33 §1): Horovod averages the gradient of broadcast and
# allgather over the set; reducescatter's is the allgathered gradient, times
# the set's size for Sum, times the scale factors.
# ---------------------------------------------------------------------------

def check_broadcast_grad(rank, size, ranks=None, process_set=hvd.global_process_set):
    ranks = list(range(size)) if ranks is None else ranks
    weights = [r + 1.0 for r in ranks]
    own = rank + 1.0
    for dtype, dim, root in itertools.product(GRAD_DTYPES, [1, 2, 3], ranks):
        # Horovod's test: every rank's output gradient is ones.
        tensor = torch.ones([5] * dim).mul_(rank).to(dtype).requires_grad_()
        broadcasted = hvd.broadcast(tensor, root, process_set=process_set)
        close(broadcasted, np.full([5] * dim, root), f"broadcast {dtype} root {root}")
        broadcasted.backward(torch.ones([5] * dim, dtype=dtype))
        c = 1 if rank == root else 0
        close(tensor.grad, np.full([5] * dim, c), f"broadcast grad {dtype} dim {dim} root {root}")
        # Rank-dependent output gradients tell the average from the sum.
        tensor = torch.ones([5] * dim, dtype=dtype, requires_grad=True)
        (hvd.broadcast(tensor, root, process_set=process_set) * own).sum().backward()
        close(tensor.grad, np.full([5] * dim, c * sum(weights) / len(weights)),
              f"broadcast weighted grad {dtype} dim {dim} root {root}")


def check_allgather_grad(rank, size, ranks=None, process_set=hvd.global_process_set):
    """Ranks contribute different first dimensions; rank r's block of the
    output gradient is filled with r on every rank (Horovod's test)."""
    ranks = list(range(size)) if ranks is None else ranks
    rows = {r: [3, 2, 7, 4, 6, 8, 10][r % 7] for r in ranks}
    own = rank + 1.0
    mean_weight = sum(r + 1.0 for r in ranks) / len(ranks)
    for dtype, dim in itertools.product(GRAD_DTYPES, [1, 2, 3]):
        shape = [rows[rank]] + [4] * (dim - 1)
        grad_ys = torch.cat([torch.full([rows[r]] + [4] * (dim - 1), float(r), dtype=dtype)
                             for r in ranks])
        tensor = torch.ones(shape).mul_(rank).to(dtype).requires_grad_()
        gathered = hvd.allgather(tensor, process_set=process_set)
        equal(list(gathered.shape), [sum(rows.values())] + [4] * (dim - 1), "allgather shape")
        gathered.backward(grad_ys)
        close(tensor.grad, np.full(shape, rank), f"allgather grad {dtype} dim {dim}")
        tensor = torch.ones(shape, dtype=dtype, requires_grad=True)
        (hvd.allgather(tensor, process_set=process_set) * grad_ys * own).sum().backward()
        close(tensor.grad, np.full(shape, rank * mean_weight),
              f"allgather weighted grad {dtype} dim {dim}")
        # grouped_allgather, as Horovod's test runs it: one backward per
        # output, each through the same node.
        tensors = [torch.ones(shape).mul_(rank).to(dtype).requires_grad_() for _ in range(3)]
        gathered = hvd.grouped_allgather(tensors, process_set=process_set)
        for g in gathered:
            g.backward(grad_ys)
        for i, t in enumerate(tensors):
            close(t.grad, np.full(shape, rank), f"grouped_allgather grad {i} {dtype} dim {dim}")
        tensors = [torch.ones(shape, dtype=dtype, requires_grad=True) for _ in range(2)]
        gathered = hvd.grouped_allgather(tensors, process_set=process_set)
        torch.autograd.backward(gathered, [grad_ys * own, grad_ys * own * 2])
        close(tensors[0].grad, np.full(shape, rank * mean_weight), "grouped weighted grad 0")
        close(tensors[1].grad, np.full(shape, 2 * rank * mean_weight), "grouped weighted grad 1")


def check_reducescatter_grad(rank, size):
    for dtype, dim in itertools.product(GRAD_DTYPES, [1, 2, 3]):
        input_shape = [size * 4] + [3] * (dim - 1)
        grad_shape = [4] + [3] * (dim - 1)
        for op, pre, post, factor in ((hvd.Sum, 1.0, 1.0, size), (hvd.Average, 1.0, 1.0, 1),
                                      (hvd.Sum, 2.0, 0.25, size * 0.5),
                                      (hvd.Average, 0.5, 4.0, 2.0)):
            what = f"reducescatter {op} pre {pre} post {post} {dtype} dim {dim}"
            tensor = torch.ones(input_shape, dtype=dtype, requires_grad=True)
            result = hvd.reducescatter(tensor, op=op, prescale_factor=pre, postscale_factor=post)
            summed = size * pre * post / (size if op == hvd.Average else 1)
            close(result, np.full(grad_shape, summed), what)
            result.backward(torch.ones(grad_shape, dtype=dtype))
            close(tensor.grad, np.full(input_shape, factor), what + " grad")
            tensors = [torch.ones(input_shape, dtype=dtype, requires_grad=True) for _ in range(2)]
            results = hvd.grouped_reducescatter(tensors, op=op, prescale_factor=pre,
                                                postscale_factor=post)
            torch.autograd.backward(results, [torch.ones(grad_shape, dtype=dtype),
                                              torch.full(grad_shape, 2.0, dtype=dtype)])
            close(tensors[0].grad, np.full(input_shape, factor), "grouped " + what + " grad 0")
            close(tensors[1].grad, np.full(input_shape, 2 * factor), "grouped " + what + " grad 1")
    # Each rank's output gradient lands in its own rows of every input gradient.
    tensor = torch.ones(2 * size, 3, requires_grad=True)
    (hvd.reducescatter(tensor, op=hvd.Sum) * (rank + 1)).sum().backward()
    expected = np.repeat(np.arange(1.0, size + 1), 2).reshape(-1, 1) * np.ones((1, 3)) * size
    close(tensor.grad, expected, "reducescatter grad rows")


def check_alltoall(rank, size):
    """Horovod 0.28's alltoall returns the rows alone without splits, the
    pair (rows, received splits) with them (test_horovod_alltoall*)."""
    for dtype, dim in itertools.product(GRAD_DTYPES, [1, 2, 3]):
        vals = []
        for i in range(size):
            vals += [i] * (rank + 1)
        tensor = torch.Tensor(vals)
        for _ in range(dim - 1):
            tensor = torch.cat((tensor.unsqueeze(1), tensor.unsqueeze(1)), dim=1)
        tensor = tensor.to(dtype).requires_grad_()
        splits = torch.tensor([rank + 1] * size, dtype=torch.int32)
        collected, received_splits = hvd.alltoall(tensor, splits)
        assert collected.min() == rank and collected.max() == rank, collected
        equal(collected.numel(), size * (size + 1) // 2 * 2 ** (dim - 1), "alltoall numel")
        equal(received_splits.tolist(), [r + 1 for r in range(size)], "received splits")
        collected.backward(torch.ones(collected.shape, dtype=dtype))
        close(tensor.grad, np.ones(tensor.shape), f"alltoall grad {dtype} dim {dim}")
        # Equal split: the rows alone.
        tensor = torch.Tensor([float(i) for i in range(size) for _ in range(2)])
        tensor = tensor.to(dtype).requires_grad_()
        collected = hvd.alltoall(tensor)
        assert isinstance(collected, torch.Tensor), type(collected)
        close(collected, np.full(2 * size, rank), f"alltoall equal split {dtype}")
        collected.backward(torch.ones(collected.shape, dtype=dtype))
        close(tensor.grad, np.ones(tensor.shape), f"alltoall equal split grad {dtype}")


def check_autograd(rank, size):
    check_alltoall(rank, size)
    check_broadcast_grad(rank, size)
    check_allgather_grad(rank, size)
    check_reducescatter_grad(rank, size)


def check_autograd_process_sets(rank, size):
    """The same over process sets (Horovod's *_grad_process_sets tests):
    the even and the odd ranks, each set on its own."""
    even = [r for r in range(size) if r % 2 == 0]
    odd = [r for r in range(size) if r % 2 == 1]
    even_set, odd_set = hvd.add_process_set(even), hvd.add_process_set(odd)
    ranks, this_set = (even, even_set) if rank % 2 == 0 else (odd, odd_set)
    check_broadcast_grad(rank, size, ranks, this_set)
    check_allgather_grad(rank, size, ranks, this_set)
    hvd.barrier()
    hvd.remove_process_set(odd_set)
    hvd.remove_process_set(even_set)


# ---------------------------------------------------------------------------
# reducescatter's ops (issue #33 §3)
# ---------------------------------------------------------------------------

def check_reducescatter_ops(rank, size):
    """Horovod's reducescatter takes Sum and Average; any other op fails on
    the rank that passes it, before anything is sent, with
    HorovodInternalError (a RuntimeError: Horovod's test catches that)."""
    calls = {
        "reducescatter": lambda t, op: hvd.reducescatter(t, op=op),
        "grouped_reducescatter": lambda t, op: hvd.grouped_reducescatter([t, t], op=op),
        "reducescatter_async": lambda t, op: hvd.reducescatter_async(t, op=op),
        "grouped_reducescatter_async": lambda t, op: hvd.grouped_reducescatter_async([t], op=op),
    }
    for (function, call), (op, name), dtype in itertools.product(
            calls.items(), ((hvd.Adasum, "Adasum"), (hvd.Min, "Min"), (hvd.Max, "Max"),
                            (hvd.Product, "Product")),
            (torch.int32, torch.int64, torch.float32, torch.float64, torch.float16,
             torch.bfloat16)):
        tensor = torch.ones(size * 4, 3).to(dtype)
        error = raises(hvd.HorovodInternalError,
                       ["Reducescatter currently only supports SUM and AVERAGE", name],
                       lambda: call(tensor, op), f"{function} op={name} {dtype}")
        assert isinstance(error, RuntimeError), error
    raises(hvd.HorovodInternalError, ["Adasum"],
           lambda: hvd.reducescatter(np.ones((size, 2)), op=hvd.Adasum), "numpy reducescatter")
    tensor = torch.ones(size * 2, 3, requires_grad=True)
    raises(hvd.HorovodInternalError, ["Adasum"],
           lambda: hvd.reducescatter(tensor, op=hvd.Adasum), "reducescatter with autograd")
    # Nothing was sent: the next reducescatter matches on every rank.
    for op, expected in ((hvd.Sum, size), (hvd.Average, 1)):
        result = hvd.reducescatter(torch.ones(size * 2, 3), op=op)
        close(result, np.full((2, 3), expected), f"reducescatter {op} after the refusals")


# ---------------------------------------------------------------------------
# broadcast_optimizer_state (issue #33 §4)
# ---------------------------------------------------------------------------

def same_on_every_rank(tensor, what):
    gathered = hvd.allgather(tensor.detach().reshape(1, -1).double())
    for r in range(1, gathered.shape[0]):
        assert torch.equal(gathered[r], gathered[0]), f"{what}: rank {r} differs from rank 0"


def check_optimizer_state(rank, size):
    # Horovod's test_broadcast_state_no_grad: a parameter that requires no
    # gradient keeps none; the others get a (zero) one, which broadcasts.
    class ModelNoGrad(torch.nn.Module):
        def __init__(self, a, b):
            super().__init__()
            self.a = torch.nn.Parameter(a.int(), requires_grad=False)
            self.b = torch.nn.Parameter(b)

        def forward(self, x):
            return torch.index_select(self.b, 0, self.a.long()) * x

    model = ModelNoGrad(torch.Tensor([1, 3]), torch.rand(4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, weight_decay=1e-6, momentum=0.9,
                                nesterov=True)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    grad = optimizer.param_groups[0]["params"][1].grad
    bgrad = hvd.broadcast(grad, root_rank=0)
    assert optimizer.param_groups[0]["params"][0].grad is None
    assert torch.all(torch.eq(grad, bgrad)).item()

    # Fine-tuning: a frozen first layer, Adam over every parameter.
    torch.manual_seed(rank)  # different initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    for p in model[0].parameters():
        p.requires_grad_(False)
    optimizer = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1)),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    for name, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and not p.grad.any(), f"{name}: no zero gradient"
            assert "exp_avg" in optimizer.state[p], f"{name}: no state"
        else:
            assert p.grad is None, f"frozen {name} got a gradient"
            assert p not in optimizer.state, f"frozen {name} got state"
    equal(optimizer.param_groups[0]["lr"], 0.01, "lr after the broadcast")
    # The ranks disagree again; the broadcast makes them root's.
    for state in optimizer.state.values():
        state["exp_avg"].add_(float(rank))
    root = size - 1
    hvd.broadcast_optimizer_state(optimizer, root_rank=root)
    for p in model[1].parameters():
        same_on_every_rank(optimizer.state[p]["exp_avg"], "exp_avg")
        close(optimizer.state[p]["exp_avg"], np.full(p.shape, float(root)), "root's exp_avg")
    optimizer.zero_grad()
    model(torch.full((2, 4), float(rank))).sum().backward()
    optimizer.step()
    for name, p in model.named_parameters():
        same_on_every_rank(p, f"{name} after a step")

    # Plain SGD (stateless from torch 2.0 on: Horovod then broadcasts nothing).
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    raises(ValueError, ["cannot broadcast torch.optim.LBFGS state"],
           lambda: hvd.broadcast_optimizer_state(torch.optim.LBFGS(model.parameters()), 0),
           "LBFGS")


# ---------------------------------------------------------------------------
# DistributedOptimizer (issue #33 §4)
# ---------------------------------------------------------------------------

def two_layer_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))


def check_parameter_names(rank, size):
    """Without named_parameters, Horovod names every parameter
    allreduce.noname.<group>.<index>; `_parameter_names` is that dict."""
    model = two_layer_model()
    groups = [{"params": list(model[0].parameters())},
              {"params": list(model[1].parameters()), "lr": 0.05}]
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(groups, lr=0.1))
    names = optimizer._parameter_names
    assert isinstance(names, dict), type(names)
    expected = {p: f"allreduce.noname.{i}.{j}" for i, group in enumerate(groups)
                for j, p in enumerate(group["params"])}
    equal(names, expected, "generated names")
    equal(hvd.allgather_object(sorted(names.values())), [sorted(expected.values())] * size,
          "the names on every rank")
    # They name the requests: a step averages the gradients.
    model(torch.full((2, 4), float(rank))).sum().backward()
    optimizer.synchronize()
    reference = two_layer_model()
    for r in range(size):
        reference(torch.full((2, 4), float(r))).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p.grad, q.grad / size, atol=1e-6), (p.grad, q.grad / size)
    with optimizer.skip_synchronize():
        optimizer.step()

    # named_parameters: its names; Horovod's errors for bad ones.
    model = two_layer_model()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    equal(sorted(optimizer._parameter_names.values()),
          sorted(name for name, _ in model.named_parameters()), "given names")
    params = list(model.parameters())
    raises(ValueError, ["must be unique", "Found duplicates: w"],
           lambda: hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1),
                                            named_parameters=[("w", p) for p in params]),
           "duplicate names")
    raises(ValueError, ["named_parameters should be a sequence of tuples"],
           lambda: hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1),
                                            named_parameters=params),
           "parameters without names")
    raises(ValueError, ["one or more model parameters were not named"],
           lambda: hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1),
                                            named_parameters=list(model.named_parameters())[1:]),
           "a parameter without a name")


def embedding_inputs(rank):
    """Horovod's test_sparse_embeddings: rank 0 looks up other rows, and
    more of them, than the other ranks."""
    if rank == 0:
        return torch.LongTensor([[1, 2, 4, 5], [4, 3, 2, 9]])
    return torch.LongTensor([[1, 3, 4], [4, 7, 9]])


def check_sparse(rank, size):
    # sparse_allreduce_async returns a function that yields the result.
    torch.manual_seed(100 + rank)
    dense = torch.rand(10, 10)
    dense = dense.mul(dense.ge(0.5).type(dense.dtype))
    for op in (hvd.Average, hvd.Sum):
        handle = hvd.sparse_allreduce_async(dense.to_sparse(), name=f"sparse.{op}", op=op)
        assert callable(handle), type(handle)
        result = handle()
        assert result.is_sparse and result.dtype == dense.dtype and result.shape == dense.shape
        expected = hvd.allreduce(dense, op=op)
        if size == 2:  # two summands: the same bits in any order
            assert expected.equal(result.to_dense()), (expected, result.to_dense())
        else:
            assert torch.allclose(expected, result.to_dense(), atol=1e-6)
    # An uncoalesced tensor (a row listed twice) goes as it is.
    uncoalesced = torch.sparse_coo_tensor([[rank, rank, size]], torch.ones(3, 2), (size + 1, 2))
    handle = hvd.sparse_allreduce_async(uncoalesced, name="sparse.uncoalesced", op=hvd.Sum)
    assert hvd.poll(handle) in (True, False)
    expected = torch.zeros(size + 1, 2)
    expected[:size] = 2.0
    expected[size] = float(size)
    close(hvd.synchronize(handle).to_dense(), expected, "uncoalesced sparse sum")

    # Horovod's test_sparse_embeddings: SparseAdam takes sparse gradients
    # only, with and without sparse_as_dense.
    for sparse_as_dense in (False, True):
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(10, 3, sparse=True)
        reference = torch.nn.Embedding(10, 3, sparse=True)
        reference.load_state_dict(embedding.state_dict())
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SparseAdam(list(embedding.parameters()), lr=0.1),
            sparse_as_dense=sparse_as_dense)
        loss = embedding(embedding_inputs(rank)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        grad = embedding.weight.grad
        assert grad.is_sparse, f"sparse_as_dense={sparse_as_dense}: the gradient became dense"
        # The average of every rank's gradient, applied by one SparseAdam.
        average = torch.zeros(10, 3)
        for r in range(size):
            for row in embedding_inputs(r).reshape(-1).tolist():
                average[row] += 1.0 / size
        close(grad.to_dense(), average, f"sparse_as_dense={sparse_as_dense} gradient")
        reference.weight.grad = average.to_sparse(1)
        torch.optim.SparseAdam(list(reference.parameters()), lr=0.1).step()
        assert torch.allclose(embedding.weight, reference.weight, atol=1e-6), \
            f"sparse_as_dense={sparse_as_dense}: weights differ from one SparseAdam step"
        same_on_every_rank(embedding.weight, f"sparse_as_dense={sparse_as_dense} weights")


def check_optimizer_process_set(rank, size):
    """DistributedOptimizer over a set of all ranks but the last, while the
    last one trains on its own (and runs a collective of its own set): the
    set's ranks average among themselves; outside the set, as in Horovod,
    the optimizer reduces nothing and steps with the rank's own gradient."""
    members = list(range(size - 1))
    trainers = hvd.add_process_set(members)
    loner = hvd.add_process_set([size - 1])
    this_set = trainers if rank in members else loner
    model = two_layer_model()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         process_set=trainers)
    for step in range(3):
        before = [p.detach().clone() for p in model.parameters()]
        batch = torch.full((2, 4), float(rank + step))
        reference = two_layer_model()
        reference.load_state_dict(model.state_dict())
        sources = members if rank in members else [rank]
        for r in sources:
            reference(torch.full((2, 4), float(r + step))).sum().backward()
        optimizer.zero_grad()
        model(batch).sum().backward()
        optimizer.step()
        for p, b, q in zip(model.parameters(), before, reference.parameters()):
            assert torch.allclose(p, b - 0.1 * q.grad / len(sources), atol=1e-6), \
                f"step {step}: rank {rank}'s update is not its set's average"
        # Other work in each rank's own set between the steps.
        total = hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=this_set)
        close(total, np.full(1, float(len(this_set.ranks))), "the set's own allreduce")
    optimizer.synchronize()  # outside the set: nothing to do, nothing to wait for
    if rank in members:
        for name, p in model.named_parameters():
            same = hvd.allgather(p.detach().reshape(1, -1), process_set=trainers)
            assert all(torch.equal(same[0], row) for row in same), f"{name} differs in the set"
    hvd.barrier()
    hvd.remove_process_set(loner)
    hvd.remove_process_set(trainers)



# ---------------------------------------------------------------------------
# build introspection (issue #33 §5)
# ---------------------------------------------------------------------------

def check_build_info(rank, size):
    """Horovod's return types and values. NCCL_VERSION_CODE: the code this
    build's nccl.h gives (the test passes it), 0 without NCCL."""
    expected_nccl = int(os.environ["EXPECTED_NCCL_VERSION_CODE"])
    nccl = hvd.nccl_built()
    assert type(nccl) is int, type(nccl)
    equal(nccl, expected_nccl, "nccl_built()")
    # What Horovod's own tests do with it: skip alltoall only on an old NCCL.
    assert not (hvd.nccl_built() and hvd.nccl_built() < 2700), nccl
    for name, value in (("mpi_built", False), ("mpi_enabled", False), ("gloo_built", True),
                        ("gloo_enabled", True), ("ddl_built", False), ("ccl_built", False),
                        ("rocm_built", False), ("is_homogeneous", True)):
        result = getattr(hvd, name)()
        assert type(result) is bool, f"{name}() returned a {type(result).__name__}"
        equal(result, value, f"{name}()")
    assert type(hvd.cuda_built()) is bool
    equal(hvd.cuda_built(), os.environ["EXPECTED_CUDA_BUILT"] == "1", "cuda_built()")
    raises(ValueError, ["Horovod MPI is not enabled"], hvd.mpi_threads_supported,
           "mpi_threads_supported() without MPI")


SECTIONS = {
    "autograd": check_autograd,
    "autograd_process_sets": check_autograd_process_sets,
    "reducescatter_ops": check_reducescatter_ops,
    "optimizer_state": check_optimizer_state,
    "parameter_names": check_parameter_names,
    "sparse": check_sparse,
    "optimizer_process_set": check_optimizer_process_set,
    "build_info": check_build_info,
    "scaling": check_scaling,
    "reducescatter_async": check_reducescatter_async,
    "reducescatter_fusion": check_reducescatter_fusion,
    "join": check_join,
}


def main(args):
    hvd.init()
    announce(hvd)
    rank, size = hvd.rank(), hvd.size()
    for section in args:
        SECTIONS[section](rank, size)
        print(f"compat {section} ok rank {rank}/{size}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
