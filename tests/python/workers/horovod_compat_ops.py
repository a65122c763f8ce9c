"""The reduction sections of horovod_compat_worker.py (issue #33 §2-4): scale factors bit for
bit, reducescatter's async and fused forms, and join. Each check computes the whole job's
expected result on every rank, as the worker's others do."""

import itertools
import json
import os
import time

import numpy as np
import torch

import horovod.torch as hvd

from compat_checks import close, equal, raises


# ---------------------------------------------------------------------------
# scale factors, bit for bit (issue #33 §2)
# ---------------------------------------------------------------------------

# Every dtype Horovod reduces on CPU, and bfloat16.
SCALE_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                torch.bfloat16, torch.float32, torch.float64]


def horovod_scale(tensor, factor):
    """Horovod's ScaleBuffer: the factor cast to the tensor's dtype and the
    product taken there; integers in float64 (truncated back), float16 and
    bfloat16 in float32 (rounded back)."""
    if factor == 1.0:
        return tensor
    dtype = tensor.dtype
    if not dtype.is_floating_point:
        return (tensor.double() * torch.tensor(factor, dtype=torch.float64)).to(dtype)
    if dtype in (torch.float16, torch.bfloat16):
        return (tensor.float() * torch.tensor(factor, dtype=torch.float32)).to(dtype)
    return tensor * torch.tensor(factor, dtype=dtype)


def horovod_sum(tensors):
    """The ranks' tensors summed in rank order, each step in the dtype (half
    ones through float32, rounded per step)."""
    total = tensors[0]
    for t in tensors[1:]:
        if total.dtype in (torch.float16, torch.bfloat16):
            total = (total.float() + t.float()).to(t.dtype)
        else:
            total = total + t
    return total


def horovod_reduce(inputs, op, pre, post):
    """What Horovod's allreduce gives for every rank's input (`inputs`, by
    rank): prescaled, summed, postscaled; Average is the postscale times
    1 / size."""
    summed = horovod_sum([horovod_scale(t, pre) for t in inputs])
    return horovod_scale(summed, post / len(inputs) if op == hvd.Average else post)


def share(tensor, rank, size):
    """Rank `rank`'s rows of a reducescatter's result (the first rows % size
    ranks get one more)."""
    rows = tensor.shape[0]
    start = rank * (rows // size) + min(rank, rows % size)
    return tensor[start:start + rows // size + (1 if rank < rows % size else 0)]


def identical(actual, expected, what):
    """The same dtype, shape and values (the data has no NaN or -0)."""
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert torch.equal(actual, expected), f"{what}: got\n{actual}\nexpected\n{expected}"


def scale_inputs(dtype, shape, size, exact_sums):
    """Every rank's input. With exact_sums, small integers that differ per
    rank (any prescale by a power of two keeps their sums exact at any
    rank count); else random values, different per rank at 2 ranks (two
    summands add alike in any order) and the same on every rank at 3 (as
    Horovod's own tests do: then the order does not matter either)."""
    inputs = []
    for r in range(size):
        if exact_sums:
            base = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape)
            values = (base % 7) + 3 * r - (5 if dtype.is_signed or dtype.is_floating_point else 0)
        else:
            generator = torch.Generator().manual_seed(1234 + (r if size == 2 else 0))
            # Small enough that no integer result leaves its type.
            span = 10 if dtype in (torch.uint8, torch.int8) else 60
            values = torch.rand(shape, generator=generator, dtype=torch.float64) * span - span / 3
            if not (dtype.is_signed or dtype.is_floating_point):
                values = values.abs()
            if not dtype.is_floating_point:
                values = values.round()
        inputs.append(values.to(dtype))
    return inputs


# (op, prescale, postscale, exact_sums): arbitrary factors on data whose
# sums are order-free, and powers of two on data that differ per rank.
SCALE_CASES = [(hvd.Sum, 0.7, 1.3, False), (hvd.Average, 0.37, 2.9, False),
               (hvd.Average, 1.0, 1.0, False), (hvd.Sum, 1.0, 0.1, False),
               (hvd.Sum, 0.5, 3.3, True), (hvd.Average, 0.25, 1.7, True),
               (hvd.Average, 1.0, 1.0, True)]


def check_scaling(rank, size):
    for dtype, (op, pre, post, exact) in itertools.product(SCALE_DTYPES, SCALE_CASES):
        what = f"{dtype} {op} pre {pre} post {post}"
        shapes = [[2 * size + 1, 3], [size + 2], [3, 2, 2]]
        inputs = [scale_inputs(dtype, shape, size, exact) for shape in shapes]
        expected = [horovod_reduce(per_rank, op, pre, post) for per_rank in inputs]
        own = [per_rank[rank] for per_rank in inputs]
        kwargs = dict(op=op, prescale_factor=pre, postscale_factor=post)
        for i, (tensor, want) in enumerate(zip(own, expected)):
            identical(hvd.allreduce(tensor, **kwargs), want, f"allreduce {i} {what}")
            identical(hvd.synchronize(hvd.allreduce_async(tensor, name=f"scale.{i}", **kwargs)),
                      want, f"allreduce_async {i} {what}")
            in_place = tensor.clone()
            hvd.allreduce_(in_place, **kwargs)
            identical(in_place, want, f"allreduce_ {i} {what}")
            if dtype != torch.bfloat16:  # numpy has no bfloat16
                identical(torch.from_numpy(hvd.allreduce(tensor.numpy(), **kwargs)), want,
                          f"numpy allreduce {i} {what}")
        for i, (got, want) in enumerate(zip(hvd.grouped_allreduce(own, **kwargs), expected)):
            identical(got, want, f"grouped_allreduce {i} {what}")
        handle = hvd.grouped_allreduce_async(own, name="scale.grouped", **kwargs)
        for i, (got, want) in enumerate(zip(hvd.synchronize(handle), expected)):
            identical(got, want, f"grouped_allreduce_async {i} {what}")
        # Reducescatter scales the same way; grouped ones fuse (uneven shares).
        if dtype in (torch.uint8, torch.int8, torch.int16):
            continue  # Horovod's reducescatter takes the dtypes below only
        scattered = [share(want, rank, size) for want in expected[:2]]
        for i in range(2):
            identical(hvd.reducescatter(own[i], **kwargs), scattered[i],
                      f"reducescatter {i} {what}")
            handle = hvd.reducescatter_async(own[i], name=f"scale.rs.{i}", **kwargs)
            identical(hvd.synchronize(handle), scattered[i], f"reducescatter_async {i} {what}")
        for i, got in enumerate(hvd.grouped_reducescatter(own[:2], **kwargs)):
            identical(got, scattered[i], f"grouped_reducescatter {i} {what}")
        handle = hvd.grouped_reducescatter_async(own[:2], name="scale.rs.grouped", **kwargs)
        for i, got in enumerate(hvd.synchronize(handle)):
            identical(got, scattered[i], f"grouped_reducescatter_async {i} {what}")


# ---------------------------------------------------------------------------
# reducescatter asynchronous, fused, and named (issue #33 §3)
# ---------------------------------------------------------------------------

def check_reducescatter_async(rank, size):
    """Rank 0 queues its requests while the other ranks wait in a broadcast
    that rank 0 joins only afterwards: its handles cannot be done, and
    poll() must say so (it returned True at once when the call ran
    synchronously)."""
    go = torch.zeros(1)
    tensors = [torch.full((size * 3, 2), float(rank + 1)), torch.full((size + 1,), 2.0 * rank)]
    want = [torch.full((3, 2), float(sum(r + 1 for r in range(size)))),
            share(torch.full((size + 1,), float(sum(2 * r for r in range(size)))), rank, size)]
    if rank == 0:
        single = hvd.reducescatter_async(tensors[0], name="rs.async.single", op=hvd.Sum)
        grouped = hvd.grouped_reducescatter_async(tensors, name="rs.async.grouped", op=hvd.Sum)
        time.sleep(0.5)  # many engine cycles: still not done, the peers have not asked
        assert not hvd.poll(single), "reducescatter_async completed without the other ranks"
        assert not hvd.poll(grouped), "grouped_reducescatter_async completed alone"
        hvd.broadcast_(go, root_rank=0, name="rs.async.go")
    else:
        hvd.broadcast_(go, root_rank=0, name="rs.async.go")
        single = hvd.reducescatter_async(tensors[0], name="rs.async.single", op=hvd.Sum)
        grouped = hvd.grouped_reducescatter_async(tensors, name="rs.async.grouped", op=hvd.Sum)
    close(hvd.synchronize(single), want[0], "reducescatter_async result")
    for i, got in enumerate(hvd.synchronize(grouped)):
        close(got, want[i], f"grouped_reducescatter_async result {i}")

    # Horovod's test_horovod_reducescatter_duplicate_name_error: a second
    # request under a pending name fails at once with Horovod's ValueError.
    # Rank 0 asks first and alone: the others ask only after the broadcast
    # below, so its first request is still pending however the machine
    # schedules us (with every rank asking at once it could complete before
    # rank 0's second call, as it did on a loaded CI machine).
    tensor = torch.ones(size * 2, 3)
    go = torch.zeros(1)
    if rank == 0:
        first = hvd.reducescatter_async(tensor, name="duplicate_name", op=hvd.Sum)
        for _ in range(3):
            raises(ValueError, ["the same name as another tensor that is currently being "
                                "processed", "duplicate_name"],
                   lambda: hvd.reducescatter_async(tensor, name="duplicate_name", op=hvd.Sum),
                   "second reducescatter_async under one name")
        hvd.broadcast_(go, root_rank=0, name="rs.duplicate.go")
    else:
        hvd.broadcast_(go, root_rank=0, name="rs.duplicate.go")
        first = hvd.reducescatter_async(tensor, name="duplicate_name", op=hvd.Sum)
    hvd.allreduce(torch.FloatTensor([1]), name="synch1")  # the first one runs meanwhile
    close(hvd.synchronize(first), torch.full((2, 3), float(size)), "the first one's result")
    if rank > 0:
        late = hvd.reducescatter_async(tensor, name="duplicate_name", op=hvd.Sum)
        raises(ValueError, ["currently being processed"],
               lambda: hvd.reducescatter_async(tensor, name="duplicate_name", op=hvd.Sum),
               "a duplicate of a name only some ranks have")
    hvd.allreduce(torch.FloatTensor([2]), name="synch2")
    if rank == 0:  # the others' late request is matched now, nothing is left over
        late = hvd.reducescatter_async(tensor, name="duplicate_name", op=hvd.Sum)
    close(hvd.synchronize(late), torch.full((2, 3), float(size)), "the late one's result")


def check_reducescatter_fusion(rank, size):
    """Reducescatters queued together run as one fused collective, as
    allreduces do: Horovod's timeline shows their batch (rank 0 writes it;
    HOROVOD_CYCLE_TIME is long, so they are negotiated together)."""
    path = os.environ["TIMELINE_PATH"]
    hvd.start_timeline(path)
    shapes = [(size * 2 + 1, 3), (size,), (size * 4 - 1, 2, 2)]
    tensors = [torch.arange(float(np.prod(s))).reshape(s) * (rank + 1) for s in shapes]
    handles = [hvd.reducescatter_async(t, name=f"rs.fused.{i}", op=hvd.Sum)
               for i, t in enumerate(tensors)]
    total = sum(r + 1 for r in range(size))
    for i, handle in enumerate(handles):
        want = share(torch.arange(float(np.prod(shapes[i]))).reshape(shapes[i]) * total, rank,
                     size)
        close(hvd.synchronize(handle), want, f"fused reducescatter {i}")
    hvd.barrier()
    hvd.stop_timeline()
    if rank != 0:
        return
    events = json.loads(open(path).read())
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    batches = {names[e["pid"]]: e.get("args", {}).get("tensors_in_batch") for e in events
               if e.get("name") == "GLOO_REDUCESCATTER" and e.get("ph") == "B"}
    for i in range(len(shapes)):
        assert batches.get(f"rs.fused.{i}") == len(shapes), \
            f"rs.fused.{i} was not fused with the others: {batches}"


# ---------------------------------------------------------------------------
# join (issue #33 §4)
# ---------------------------------------------------------------------------

JOIN_DTYPES = [torch.int32, torch.int64, torch.float32, torch.float64]


def check_join(rank, size):
    """Horovod's test_horovod_join_allreduce: one rank joins at once while
    the others allreduce two tensors (fused) with Average; the joined rank
    contributes zeros and Average still divides by the whole set (Horovod
    averages through postscale_factor = 1 / size). join() returns the same
    rank everywhere, not the one that joined first."""
    for dtype, dim, first_join_rank, caching in itertools.product(
            JOIN_DTYPES, [1, 2, 3], [0, size - 1], [False, True]):
        torch.manual_seed(1234)
        tensor_a = torch.FloatTensor(*([5] * dim)).random_(-100, 100).to(dtype)
        tensor_b = torch.FloatTensor(*([17] * dim)).random_(-100, 100).to(dtype)
        what = f"join {dtype} dim {dim} first {first_join_rank} caching {caching}"
        if caching:
            handle_a = hvd.allreduce_async(tensor_a, name="tensor_a", average=True)
            handle_b = hvd.allreduce_async(tensor_b, name="tensor_b", average=True)
            hvd.synchronize(handle_a)
            hvd.synchronize(handle_b)
        if rank == first_join_rank:
            ret = hvd.join()
        else:
            handle_a = hvd.allreduce_async(tensor_a, name="tensor_a", average=True)
            handle_b = hvd.allreduce_async(tensor_b, name="tensor_b", average=True)
            averaged_a = hvd.synchronize(handle_a)
            averaged_b = hvd.synchronize(handle_b)
            ret = hvd.join()
            for averaged, tensor in ((averaged_a, tensor_a), (averaged_b, tensor_b)):
                contributions = [torch.zeros_like(tensor) if r == first_join_rank else tensor
                                 for r in range(size)]
                identical(averaged, horovod_reduce(contributions, hvd.Average, 1.0, 1.0), what)
        assert ret != first_join_rank or size == 1, f"{what}: join() returned {ret}"
        equal(hvd.allgather_object(ret), [ret] * size, f"{what}: join() differs between ranks")

    # Ranks run out of data one after another: rank r joins after steps[r]
    # steps; each step's Sum and Average take zeros from the joined ranks;
    # join() returns the last rank to join, on every rank.
    for steps in ([r + 1 for r in range(size)], [size - r for r in range(size)]):
        for step in range(steps[rank]):
            values = [torch.tensor([float(r + 1), 2.0 * r - 3.0]) if steps[r] > step
                      else torch.zeros(2) for r in range(size)]
            for op in (hvd.Sum, hvd.Average):
                got = hvd.allreduce(values[rank], op=op, name=f"join.steps.{op}",
                                    prescale_factor=0.5, postscale_factor=3.0)
                identical(got, horovod_reduce(values, op, 0.5, 3.0), f"steps {steps} {op}")
            counts = [torch.tensor([r + 7], dtype=torch.int32) if steps[r] > step
                      else torch.zeros(1, dtype=torch.int32) for r in range(size)]
            identical(hvd.allreduce(counts[rank], op=hvd.Average, name="join.steps.count"),
                      horovod_reduce(counts, hvd.Average, 1.0, 1.0), f"steps {steps} count")
        last = hvd.join()
        equal(last, steps.index(max(steps)), f"join() after steps {steps}")
    # Everyone is back: a plain allreduce takes every rank again.
    close(hvd.allreduce(torch.ones(1), op=hvd.Sum), np.full(1, float(size)), "after join")
