"""Runs under horovodrun, written as a Horovod script (`import horovod.torch
as hvd`): Horovod 0.28's public names and their behaviour, each checked
against numpy or single-process torch. Every rank can make every rank's
input (it depends on the rank only), so each check computes the whole
job's expected result locally.

    horovod_api_worker.py SECTION...

Sections: names, scaling, autograd, errors, grouped, adasum, optimizer,
sync_bn, elastic_state, process_sets_off (runtime as on main); dtypes,
join, process_sets, timeline DIR (need the engine's additions). Prints
"api SECTION ok rank R/S" after each; exits non-zero at the first mismatch.
"""

import inspect
import os
import sys
import warnings

import numpy as np
import torch

import horovod.torch as hvd
from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

from announce import announce


def close(actual, expected, what, tolerance=1e-6):
    actual = actual.detach().double().numpy() if isinstance(actual, torch.Tensor) \
        else np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert np.allclose(actual, expected, rtol=tolerance, atol=tolerance), \
        f"{what}: got\n{actual}\nexpected\n{expected}"


def equal(actual, expected, what):
    assert actual == expected, f"{what}: got {actual!r}, expected {expected!r}"


def data(rank, shape, seed=0):
    return torch.from_numpy(
        np.random.RandomState(100 + 17 * rank + seed).uniform(-1, 1, size=shape)).float()


# ---------------------------------------------------------------------------

PUBLIC_NAMES = """
elastic Compression allgather_object broadcast_object broadcast_optimizer_state
broadcast_parameters allreduce allreduce_ allreduce_async allreduce_async_
grouped_allreduce grouped_allreduce_ grouped_allreduce_async grouped_allreduce_async_
sparse_allreduce_async allgather allgather_async grouped_allgather grouped_allgather_async
broadcast broadcast_ broadcast_async broadcast_async_ alltoall alltoall_async
reducescatter reducescatter_async grouped_reducescatter grouped_reducescatter_async join
barrier poll synchronize init shutdown is_initialized start_timeline stop_timeline size
local_size cross_size rank local_rank cross_rank is_homogeneous mpi_threads_supported
mpi_enabled mpi_built gloo_enabled gloo_built nccl_built ddl_built ccl_built cuda_built
rocm_built ProcessSet global_process_set add_process_set remove_process_set Average Sum
Adasum Min Max Product HorovodInternalError DistributedOptimizer SyncBatchNorm
""".split()

# Horovod 0.28's parameters, in order, with their defaults where a script
# might rely on them positionally.
SIGNATURES = {
    "allreduce": "tensor average name compression op prescale_factor postscale_factor "
                 "process_set",
    "allreduce_": "tensor average name op prescale_factor postscale_factor process_set",
    "allreduce_async": "tensor average name op prescale_factor postscale_factor process_set",
    "grouped_allreduce": "tensors average name compression op prescale_factor "
                         "postscale_factor process_set",
    "sparse_allreduce_async": "tensor name op process_set",
    "allgather": "tensor name process_set",
    "grouped_allgather": "tensors name process_set",
    "broadcast": "tensor root_rank name process_set",
    "broadcast_async_": "tensor root_rank name process_set",
    "alltoall": "tensor splits name process_set",
    "reducescatter": "tensor name compression op process_set prescale_factor "
                     "postscale_factor",
    "reducescatter_async": "tensor name op process_set prescale_factor postscale_factor",
    "grouped_reducescatter": "tensors name compression op process_set prescale_factor "
                             "postscale_factor",
    "join": "device",
    "barrier": "process_set",
    "init": "comm process_sets",
    "start_timeline": "file_path mark_cycles",
    "broadcast_object": "obj root_rank name process_set",
    "allgather_object": "obj name process_set",
    "DistributedOptimizer": "optimizer named_parameters compression backward_passes_per_step "
                            "op gradient_predivide_factor num_groups groups sparse_as_dense "
                            "process_set",
}


def check_names(rank, size):
    missing = [n for n in PUBLIC_NAMES if not hasattr(hvd, n)]
    assert not missing, f"missing names: {missing}"
    for name, params in SIGNATURES.items():
        actual = list(inspect.signature(getattr(hvd, name)).parameters)
        equal(actual, params.split(), f"signature of {name}")
    equal(inspect.signature(hvd.allreduce).parameters["op"].default, None, "allreduce op")
    equal(inspect.signature(hvd.reducescatter).parameters["op"].default, hvd.Average,
          "reducescatter op")
    equal(inspect.signature(hvd.join).parameters["device"].default, -1, "join device")
    equal((hvd.mpi_built(), hvd.gloo_built(), hvd.mpi_enabled(), hvd.gloo_enabled(),
           hvd.ddl_built(), hvd.ccl_built(), hvd.rocm_built()),
          (False, True, False, True, False, False, False), "build info")
    # Horovod's types: nccl_built() is NCCL's version code (0 without NCCL).
    assert type(hvd.nccl_built()) is int and type(hvd.cuda_built()) is bool
    assert hvd.is_homogeneous() is True
    assert hvd.is_initialized()
    assert issubclass(HorovodInternalError, RuntimeError)
    assert HostsUpdatedInterrupt is hvd.elastic.HostsUpdatedInterrupt
    import horovodd.torch
    assert horovodd.torch is hvd
    equal((hvd.global_process_set.process_set_id, hvd.global_process_set.size(),
           hvd.global_process_set.rank(), hvd.global_process_set.included()),
          (0, size, rank, True), "global_process_set")
    # Compression.fp16 round trip keeps the dtype.
    reduced = hvd.allreduce(torch.ones(3, dtype=torch.float64), compression=hvd.Compression.fp16)
    equal(reduced.dtype, torch.float64, "fp16 compression result dtype")
    close(reduced, np.ones(3), "fp16 compression")
    objects = hvd.allgather_object({"rank": rank})
    equal(objects, [{"rank": r} for r in range(size)], "allgather_object")
    equal(hvd.broadcast_object(f"from {rank}", root_rank=size - 1), f"from {size - 1}",
          "broadcast_object")


def check_scaling(rank, size):
    """Horovod scales integers in float64 and half tensors in float32, each
    element cast back, before the sum; Average folds into the postscale."""
    ints = [np.arange(6, dtype=np.int32) * (r + 1) + r for r in range(size)]
    for pre, post, op in ((0.5, 1.0, hvd.Sum), (1.0, 2.5, hvd.Sum), (1.5, 0.5, hvd.Average),
                          (0.7, 3.0, hvd.Sum)):
        scaled = [np.trunc(x.astype(np.float64) * pre).astype(np.int32) for x in ints]
        total = np.sum(np.stack(scaled).astype(np.int64), axis=0)
        factor = post / size if op == hvd.Average else post
        expected = np.trunc(total.astype(np.float64) * factor).astype(np.int32)
        for kind in ("sync", "async", "numpy"):
            mine = torch.from_numpy(ints[rank].copy())
            if kind == "sync":
                result = hvd.allreduce(mine, op=op, prescale_factor=pre, postscale_factor=post)
            elif kind == "async":
                result = hvd.synchronize(hvd.allreduce_async(
                    mine, op=op, prescale_factor=pre, postscale_factor=post))
            else:
                result = torch.from_numpy(hvd.allreduce(
                    ints[rank].copy(), op=op, prescale_factor=pre, postscale_factor=post))
            equal(result.dtype, torch.int32, f"int32 scaled {kind} dtype")
            assert np.array_equal(result.numpy(), expected), \
                f"int32 {kind} pre={pre} post={post} {op}: {result.numpy()} != {expected}"
    halves = [np.linspace(0.1, 2.0, 7).astype(np.float16) * (r + 1) for r in range(size)]
    pre, post = 0.3, 1.7
    scaled = [(x.astype(np.float32) * pre).astype(np.float16) for x in halves]
    total = scaled[0].astype(np.float16)
    for x in scaled[1:]:
        total = (total.astype(np.float32) + x.astype(np.float32)).astype(np.float16)
    expected = (total.astype(np.float32) * post).astype(np.float16)
    result = hvd.allreduce(torch.from_numpy(halves[rank].copy()), op=hvd.Sum,
                           prescale_factor=pre, postscale_factor=post)
    close(result, expected, "float16 scaled", tolerance=2e-3)
    # The reducescatter takes them too.
    floats = [np.arange(2 * size * 3, dtype=np.float64).reshape(2 * size, 3) + r
              for r in range(size)]
    result = hvd.reducescatter(torch.from_numpy(floats[rank].copy()), op=hvd.Sum,
                               prescale_factor=2.0, postscale_factor=0.25)
    close(result, (np.sum(floats, axis=0) * 0.5)[2 * rank:2 * rank + 2],
          "reducescatter scaled")


def check_autograd(rank, size):
    weights = [float(r + 1) for r in range(size)]
    own = weights[rank]
    total, mean = sum(weights), sum(weights) / size

    x = torch.ones(2, 3, requires_grad=True)
    (hvd.allreduce(x, op=hvd.Average) * own).sum().backward()
    close(x.grad, np.full((2, 3), mean), "allreduce Average gradient")
    x = torch.ones(2, 3, requires_grad=True)
    (hvd.allreduce(x, op=hvd.Sum) * own).sum().backward()
    close(x.grad, np.full((2, 3), total), "allreduce Sum gradient")
    x = torch.ones(2, requires_grad=True)
    (hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0) * own).sum().backward()
    close(x.grad, np.full(2, 2.0 * total), "allreduce prescaled gradient")

    xs = [torch.ones(2, requires_grad=True), torch.ones(3, 2, requires_grad=True)]
    outs = hvd.grouped_allreduce(xs, op=hvd.Average)
    (sum((o * own * (i + 1)).sum() for i, o in enumerate(outs))).backward()
    close(xs[0].grad, np.full(2, mean), "grouped_allreduce gradient 0")
    close(xs[1].grad, np.full((3, 2), 2 * mean), "grouped_allreduce gradient 1")

    # allgather: rank r gives r+1 rows; the loss weighs gathered row i by i+1.
    # Horovod averages the gradients of allgather and broadcast over the ranks.
    rows = [r + 1 for r in range(size)]
    offset = sum(rows[:rank])
    row_weights = torch.arange(1, sum(rows) + 1, dtype=torch.float32).view(-1, 1)
    x = torch.ones(rows[rank], 2, requires_grad=True)
    (hvd.allgather(x) * row_weights * own).sum().backward()
    expected = (row_weights[offset:offset + rows[rank]] * mean).expand(rows[rank], 2)
    close(x.grad, expected.numpy(), "allgather gradient")
    xs = [torch.ones(rows[rank], 2, requires_grad=True), torch.ones(1, requires_grad=True)]
    outs = hvd.grouped_allgather(xs)
    ((outs[0] * row_weights * own).sum() + (outs[1] * own).sum()).backward()
    close(xs[0].grad, expected.numpy(), "grouped_allgather gradient 0")
    close(xs[1].grad, np.full(1, mean), "grouped_allgather gradient 1")

    root = size - 1
    x = torch.ones(3, requires_grad=True)
    (hvd.broadcast(x, root_rank=root) * own).sum().backward()
    close(x.grad, np.full(3, mean if rank == root else 0.0), "broadcast gradient")

    # alltoall: row j of rank r's input goes to rank j, weighed there by j+1.
    # Without splits Horovod returns the rows alone; with them, the pair.
    x = torch.ones(size, 2, requires_grad=True)
    received = hvd.alltoall(x)
    (received * own).sum().backward()
    close(x.grad, np.repeat(np.array(weights).reshape(-1, 1), 2, axis=1), "alltoall gradient")
    x = torch.ones(size, 2, requires_grad=True)
    received, splits = hvd.alltoall(x, splits=[1] * size)
    close(splits, np.ones(size), "alltoall received splits")
    (received * own).sum().backward()
    close(x.grad, np.repeat(np.array(weights).reshape(-1, 1), 2, axis=1), "alltoall gradient")

    # reducescatter: rank j keeps rows 2j, 2j+1 and weighs them by j+1.
    # Horovod's gradient is the allgathered one, times size() for Sum.
    per_row = np.repeat(np.array(weights), 2).reshape(-1, 1) * np.ones((1, 3))
    for op, factor in ((hvd.Sum, float(size)), (hvd.Average, 1.0)):
        x = torch.ones(2 * size, 3, requires_grad=True)
        (hvd.reducescatter(x, op=op) * own).sum().backward()
        close(x.grad, per_row * factor, f"reducescatter {op} gradient")
    xs = [torch.ones(2 * size, 3, requires_grad=True)]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum)
    (outs[0] * own).sum().backward()
    close(xs[0].grad, per_row * size, "grouped_reducescatter gradient")


def check_errors(rank, size):
    """Ranks that disagree get a RuntimeError on every rank, naming it."""
    cases = {
        "shape": lambda: hvd.allreduce(torch.ones(2 + rank), name="disagree.shape"),
        "dtype": lambda: hvd.allreduce(torch.ones(2, dtype=torch.float32 if rank == 0
                                                  else torch.float64), name="disagree.dtype"),
        "allgather dims": lambda: hvd.allgather(torch.ones(1, 2 + rank), name="disagree.ag"),
        "root": lambda: hvd.broadcast(torch.ones(2), root_rank=rank, name="disagree.root"),
        "op": lambda: hvd.allreduce(torch.ones(2), op=hvd.Sum if rank else hvd.Max,
                                    name="disagree.op"),
        "async shape": lambda: hvd.synchronize(
            hvd.allreduce_async(torch.ones(3 + rank), name="disagree.async")),
    }
    for what, call in cases.items():
        try:
            call()
        except RuntimeError as error:
            assert not isinstance(error, HorovodInternalError), f"{what}: {error!r}"
            assert "rank" in str(error), f"{what}: the message names no rank: {error}"
        else:
            raise AssertionError(f"{what}: no RuntimeError")
    # The job goes on afterwards.
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum), np.full(2, size), "after the errors")


def check_grouped(rank, size):
    inputs = [[data(r, (r + 1, 2)), data(r, (2, 3), seed=1)] for r in range(size)]
    gathered = hvd.grouped_allgather(inputs[rank])
    for i, g in enumerate(gathered):
        close(g, torch.cat([inputs[r][i] for r in range(size)]).numpy(), f"grouped_allgather {i}")
    handle = hvd.grouped_allgather_async(inputs[rank], name="ga.async")
    for i, g in enumerate(hvd.synchronize(handle)):
        close(g, torch.cat([inputs[r][i] for r in range(size)]).numpy(), "grouped_allgather_async")
    scattered = [[data(r, (2 * size, 2), seed=3), data(r, (size, 4), seed=4)] for r in range(size)]
    for op, divisor in ((hvd.Sum, 1), (hvd.Average, size)):
        results = hvd.grouped_reducescatter(scattered[rank], op=op)
        for i, result in enumerate(results):
            total = sum(scattered[r][i] for r in range(size)) / divisor
            rows = total.shape[0] // size
            close(result, total[rank * rows:(rank + 1) * rows].numpy(),
                  f"grouped_reducescatter {op} {i}", tolerance=1e-5)
    results = hvd.synchronize(hvd.grouped_reducescatter_async(scattered[rank], op=hvd.Sum))
    close(results[1], sum(s[1] for s in scattered)[rank:rank + 1].numpy(),
          "grouped_reducescatter_async", tolerance=1e-5)
    # sparse_allreduce_async: the sum (or average) of every rank's sparse rows.
    dense = [torch.zeros(2 * size, 3) for _ in range(size)]
    for r in range(size):
        dense[r][r] = r + 1.0
        dense[r][2 * size - 1] = 1.0
    for op, divisor in ((hvd.Sum, 1), (hvd.Average, size)):
        handle = hvd.sparse_allreduce_async(dense[rank].to_sparse(), name=f"sparse.{op}", op=op)
        result = hvd.synchronize(handle)
        assert result.is_sparse, "sparse_allreduce_async returns a sparse tensor"
        close(result.to_dense(), (sum(dense) / divisor).numpy(), f"sparse_allreduce {op}")


def adasum_reference(vectors):
    """The paper's pairwise rule, applied level by level (rank pairs at
    distance 1, then 2, ...), ranks past the largest power of two first
    folded into the first ones."""
    def combine(a, b):
        if not a.any():
            return b
        if not b.any():
            return a
        dot = a @ b
        return (1 - dot / (2 * (a @ a))) * a + (1 - dot / (2 * (b @ b))) * b
    vectors = [v.astype(np.float64) for v in vectors]
    power = 2 ** int(np.floor(np.log2(len(vectors))))
    for extra in range(power, len(vectors)):
        vectors[extra - power] = combine(vectors[extra - power], vectors[extra])
    vectors = vectors[:power]
    distance = 1
    while distance < power:
        for start in range(0, power, 2 * distance):
            vectors[start] = combine(vectors[start], vectors[start + distance])
        distance *= 2
    return vectors[0]


def check_adasum(rank, size):
    inputs = [np.random.RandomState(7 + r).uniform(-1, 1, 12) for r in range(size)]
    expected = adasum_reference(inputs)
    result = hvd.allreduce(torch.from_numpy(inputs[rank].copy()), op=hvd.Adasum)
    close(result, expected, "allreduce Adasum", tolerance=1e-10)
    result = hvd.synchronize(hvd.allreduce_async(torch.from_numpy(inputs[rank].copy()),
                                                 op=hvd.Adasum))
    close(result, expected, "allreduce_async Adasum", tolerance=1e-10)
    # Equal vectors: their average; orthogonal ones: their sum.
    close(hvd.allreduce(torch.ones(4, dtype=torch.float64), op=hvd.Adasum), np.ones(4),
          "Adasum of equal vectors")
    # Halves of unequal length at every level, fewer elements than ranks, the
    # scale factors, and the float dtypes the engine takes.
    for length in (1001, 1):
        inputs_n = [np.random.RandomState(11 + r).uniform(-1, 1, length) for r in range(size)]
        for dtype, tolerance in ((torch.float32, 1e-5), (torch.bfloat16, 3e-2),
                                 (torch.float16, 1e-2)):
            sent = [torch.from_numpy(v).to(dtype) for v in inputs_n]
            expected_n = adasum_reference([v.double().numpy() for v in sent])
            result = hvd.allreduce(sent[rank], op=hvd.Adasum, prescale_factor=4.0,
                                   postscale_factor=0.5)
            equal(result.dtype, dtype, f"Adasum result dtype for {dtype}")
            close(result.double(), 2.0 * expected_n, f"Adasum of {length} {dtype}",
                  tolerance=tolerance)
    # DistributedOptimizer(op=Adasum): SGD steps by -lr * Adasum(gradients).
    model = torch.nn.Linear(12, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                         named_parameters=model.named_parameters(),
                                         op=hvd.Adasum)
    model(torch.from_numpy(inputs[rank]).float().view(1, -1)).sum().backward()
    optimizer.step()
    close(model.weight.view(-1), -0.5 * adasum_reference(inputs), "Adasum optimizer",
          tolerance=1e-5)


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def local_gradients(model, rank, passes=1):
    """{name: gradient} of rank `rank`'s loss (summed over `passes`
    batches) on a copy of `model`, computed on this process."""
    copy = make_model()
    copy.load_state_dict(model.state_dict())
    for batch in range(passes):
        copy(data(rank, (5, 4), seed=batch)).pow(2).sum().backward()
    return {name: p.grad.clone() for name, p in copy.named_parameters()}


def check_optimizer(rank, size):
    every = [None] * size
    for options in ({}, {"num_groups": 2}, {"groups": "halves"}, {"op": hvd.Sum},
                    {"gradient_predivide_factor": 2.0}, {"backward_passes_per_step": 2},
                    {"compression": hvd.Compression.fp16}):
        model = make_model()
        kwargs = dict(options)
        if kwargs.get("groups") == "halves":
            params = list(model.parameters())
            kwargs["groups"] = [params[:2], params[2:]]
        passes = kwargs.get("backward_passes_per_step", 1)
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                             named_parameters=model.named_parameters(),
                                             **kwargs)
        every = [local_gradients(model, r, passes) for r in range(size)]
        for batch in range(passes):
            model(data(rank, (5, 4), seed=batch)).pow(2).sum().backward()
        optimizer.synchronize()
        divisor = 1 if options.get("op") == hvd.Sum else size
        tolerance = 2e-3 if "compression" in options else 1e-5
        for name, p in model.named_parameters():
            expected = sum(g[name] for g in every) / divisor
            close(p.grad, expected.numpy(), f"{options}: gradient of {name}", tolerance)
        with optimizer.skip_synchronize():
            optimizer.step()
        optimizer.zero_grad()
    # step() right after synchronize(), outside skip_synchronize(): Horovod's warning.
    model = make_model()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    model(data(rank, (5, 4))).sum().backward()
    optimizer.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.step()
    assert any("skip_synchronize" in str(w.message) for w in caught), \
        f"no warning for step() after synchronize(): {[str(w.message) for w in caught]}"
    # Sparse gradients (an embedding): sparse_as_dense, and the sparse path.
    for sparse_as_dense in (True, False):
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(6, 2, sparse=True)
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=1.0),
                                             named_parameters=embedding.named_parameters(),
                                             sparse_as_dense=sparse_as_dense)
        before = embedding.weight.detach().clone()
        embedding(torch.tensor([rank, 5])).sum().backward()
        optimizer.step()
        expected = before.clone()
        for r in range(size):
            expected[r] -= 1.0 / size
        expected[5] -= 1.0
        close(embedding.weight, expected.numpy(), f"embedding sparse_as_dense={sparse_as_dense}")


def check_sync_bn(rank, size):
    inputs = [data(r, (3, 4, 2, 2), seed=5) * (r + 1) + r for r in range(size)]
    torch.manual_seed(3)
    sync_bn = hvd.SyncBatchNorm(4, momentum=0.3)
    reference = torch.nn.BatchNorm2d(4, momentum=0.3)
    with torch.no_grad():
        sync_bn.weight.copy_(torch.linspace(0.5, 2, 4))
        sync_bn.bias.copy_(torch.linspace(-1, 1, 4))
    reference.load_state_dict(sync_bn.state_dict())
    upstream = [data(r, (3, 4, 2, 2), seed=6) for r in range(size)]

    x = inputs[rank].clone().requires_grad_(True)
    out = sync_bn(x)
    (out * upstream[rank]).sum().backward()

    everything = torch.cat(inputs).requires_grad_(True)
    expected = reference(everything)
    (expected * torch.cat(upstream)).sum().backward()
    rows = slice(3 * rank, 3 * rank + 3)
    close(out, expected[rows].detach().numpy(), "SyncBatchNorm forward", tolerance=1e-4)
    close(x.grad, everything.grad[rows].numpy(), "SyncBatchNorm input gradient", tolerance=1e-4)
    close(hvd.allreduce(sync_bn.weight.grad, op=hvd.Sum), reference.weight.grad.numpy(),
          "SyncBatchNorm weight gradient (summed)", tolerance=1e-4)
    close(hvd.allreduce(sync_bn.bias.grad, op=hvd.Sum), reference.bias.grad.numpy(),
          "SyncBatchNorm bias gradient (summed)", tolerance=1e-4)
    close(sync_bn.running_mean, reference.running_mean.numpy(), "running mean", 1e-5)
    close(sync_bn.running_var, reference.running_var.numpy(), "running var", 1e-5)
    sync_bn.eval()
    reference.eval()
    close(sync_bn(inputs[rank]), reference(inputs[rank]).detach().numpy(), "eval", 1e-5)


def check_elastic_state(rank, size):
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0, commits=0)
    state.commits = 7
    state.epoch = 2
    state.save()
    state.epoch = 5
    state.restore()
    equal((state.epoch, state.commits, state.batch), (2, 7, 0), "TorchState values")
    assert state.model is model and state.optimizer is optimizer


def check_process_sets_off(rank, size):
    """Without HOROVOD_DYNAMIC_PROCESS_SETS, adding a set is Horovod's error."""
    try:
        hvd.add_process_set([0])
    except ValueError as error:
        assert "HOROVOD_DYNAMIC_PROCESS_SETS" in str(error), error
    else:
        raise AssertionError("add_process_set without dynamic process sets succeeded")


# --- sections that need the engine's additions ------------------------------

def check_dtypes(rank, size):
    for dtype in (torch.int8, torch.int16, torch.bfloat16, torch.uint8, torch.int32,
                  torch.int64, torch.float16, torch.float32, torch.float64):
        x = (torch.arange(6) % 3 + rank).to(dtype)
        expected = sum((torch.arange(6) % 3 + r) for r in range(size)).to(dtype)
        result = hvd.allreduce(x, op=hvd.Sum)
        equal(result.dtype, dtype, "allreduce dtype")
        close(result.double(), expected.double().numpy(), f"allreduce {dtype}", 1e-2)
        gathered = hvd.allgather(x.view(2, 3))
        equal(gathered.dtype, dtype, "allgather dtype")
    flags = torch.tensor([rank % 2 == 0, True, False])
    gathered = hvd.allgather(flags)
    equal(gathered.tolist(), [v for r in range(size) for v in [r % 2 == 0, True, False]],
          "allgather bool")
    equal(hvd.broadcast(flags, root_rank=1).tolist(), [False, True, False], "broadcast bool")


def check_join(rank, size):
    """The last rank has one batch fewer: it joins early; the others'
    allreduce goes on with it contributing zeros (Average still divides by
    every rank, as in Horovod)."""
    batches = 3 if rank < size - 1 else 2
    for batch in range(batches):
        contributors = size if batch < 2 else size - 1
        result = hvd.allreduce(torch.full((2,), float(rank + 1)), op=hvd.Average,
                               name=f"join.batch.{batch}")
        expected = sum(r + 1 for r in range(contributors)) / size
        close(result, np.full(2, expected), f"join batch {batch}")
    last = hvd.join()
    assert 0 <= last < size, last


def check_process_sets(rank, size):
    """Static sets from init, and dynamic ones (HOROVOD_DYNAMIC_PROCESS_SETS=1)."""
    evens = EVENS
    assert evens.process_set_id not in (None, 0), evens
    equal(evens.ranks, list(range(0, size, 2)), "static set ranks")
    equal(evens.included(), rank % 2 == 0, "included()")
    if evens.included():
        equal(evens.rank(), rank // 2, "rank() in the set")
        result = hvd.allreduce(torch.full((2,), float(rank)), op=hvd.Sum, process_set=evens)
        close(result, np.full(2, sum(range(0, size, 2))), "allreduce over the set")
        gathered = hvd.allgather(torch.tensor([rank]), process_set=evens)
        equal(gathered.tolist(), list(range(0, size, 2)), "allgather over the set")
    hvd.barrier()
    pair = hvd.add_process_set([0, 1])
    if rank in (0, 1):
        close(hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=pair), np.full(1, 2.0),
              "allreduce over a dynamic set")
    assert hvd.remove_process_set(pair) is True
    assert pair.process_set_id is None
    # DistributedOptimizer over the set: its ranks average among themselves.
    if evens.included():
        model = make_model()
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                             named_parameters=model.named_parameters(),
                                             process_set=evens)
        every = [local_gradients(model, r) for r in range(0, size, 2)]
        model(data(rank, (5, 4))).pow(2).sum().backward()
        optimizer.synchronize()
        for name, p in model.named_parameters():
            close(p.grad, (sum(g[name] for g in every) / len(every)).numpy(),
                  f"optimizer over the set: {name}", 1e-5)
    hvd.barrier()


def check_timeline(rank, size, directory):
    import json
    path = os.path.join(directory, "timeline.json")
    hvd.start_timeline(path, mark_cycles=False)
    for i in range(3):
        hvd.allreduce(torch.ones(4), name=f"timeline.tensor.{i}")
    hvd.stop_timeline()
    hvd.barrier()
    if rank == 0:
        with open(path) as trace:
            events = json.load(trace)
        events = events["traceEvents"] if isinstance(events, dict) else events
        names = json.dumps(events)
        assert "timeline.tensor.0" in names, names[:2000]


EVENS = None
SECTIONS = {
    "names": check_names, "scaling": check_scaling, "autograd": check_autograd,
    "errors": check_errors, "grouped": check_grouped, "adasum": check_adasum,
    "optimizer": check_optimizer, "sync_bn": check_sync_bn,
    "elastic_state": check_elastic_state, "process_sets_off": check_process_sets_off,
    "dtypes": check_dtypes, "join": check_join, "process_sets": check_process_sets,
}


def main(args):
    global EVENS
    if "process_sets" in args:
        EVENS = hvd.ProcessSet(list(range(0, int(os.environ["API_TEST_SIZE"]), 2)))
        hvd.init(process_sets=[EVENS])
    else:
        hvd.init()
    announce(hvd)
    rank, size = hvd.rank(), hvd.size()
    index = 0
    while index < len(args):
        section = args[index]
        if section == "timeline":
            check_timeline(rank, size, args[index + 1])
            index += 2
        else:
            SECTIONS[section](rank, size)
            index += 1
        print(f"api {section} ok rank {rank}/{size}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
