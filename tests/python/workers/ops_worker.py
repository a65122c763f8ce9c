"""Runs under horovodrun: every collective of horovodd.torch, on numpy arrays
and on torch tensors, against the result numpy computes from every rank's
input (each rank can make every rank's input: it depends on the rank only).
Exits non-zero at the first mismatch; prints "ops ok" when all matched."""

import sys

import numpy as np
import torch

import horovodd.torch as hvd

from announce import announce

DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8"]
TOLERANCE = {"float16": 2e-2, "float32": 1e-5, "float64": 1e-12}


def make(rank, shape, dtype, low=0, high=4):
    """Rank `rank`'s input: small values, so uint8 sums and products of up to
    4 ranks do not overflow."""
    rng = np.random.RandomState(1000 + rank * 7 + len(shape))
    if dtype.startswith("float"):
        return rng.uniform(0.5, 1.5, size=shape).astype(dtype)
    return rng.randint(low, high, size=shape).astype(dtype)


def as_kind(array, kind):
    return torch.from_numpy(np.array(array)) if kind == "torch" else np.array(array)


def to_numpy(tensor, kind):
    if kind == "torch":
        assert isinstance(tensor, torch.Tensor), f"expected a torch.Tensor, got {type(tensor)}"
        return tensor.numpy()
    assert isinstance(tensor, np.ndarray), f"expected a numpy.ndarray, got {type(tensor)}"
    return tensor


def check(actual, expected, what, kind):
    actual = to_numpy(actual, kind)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    tolerance = TOLERANCE.get(str(expected.dtype))
    if tolerance is None:
        ok = np.array_equal(actual, expected)
    else:
        ok = np.allclose(actual.astype("float64"), expected.astype("float64"), rtol=tolerance,
                         atol=tolerance)
    assert ok, f"{what}: got\n{actual}\nexpected\n{expected}"


def reduce_all(inputs, op, dtype):
    stacked = np.stack([x.astype("float64") for x in inputs])
    if op == hvd.Sum:
        result = stacked.sum(axis=0)
    elif op == hvd.Average:
        result = stacked.sum(axis=0) / len(inputs)
        if not dtype.startswith("float"):
            result = np.trunc(result)
    elif op == hvd.Min:
        result = stacked.min(axis=0)
    elif op == hvd.Max:
        result = stacked.max(axis=0)
    else:
        result = stacked.prod(axis=0)
    return result.astype(dtype)


def check_allreduce(kind, rank, size):
    shape = (3, 5)
    for dtype in DTYPES:
        inputs = [make(r, shape, dtype) for r in range(size)]
        for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product):
            what = f"allreduce {op} {dtype} {kind}"
            mine = as_kind(inputs[rank], kind)
            result = hvd.allreduce(mine, op=op, name=what)
            check(result, reduce_all(inputs, op, dtype), what, kind)
            check(mine, inputs[rank], f"{what} left its input alone", kind)
            in_place = as_kind(inputs[rank], kind)
            assert hvd.allreduce_(in_place, op=op) is in_place
            check(in_place, reduce_all(inputs, op, dtype), f"in-place {what}", kind)
        if dtype.startswith("float"):
            result = hvd.allreduce(as_kind(inputs[rank], kind), op=hvd.Sum, prescale_factor=3.0,
                                   postscale_factor=0.5)
            expected = (reduce_all(inputs, hvd.Sum, "float64") * 1.5).astype(dtype)
            check(result, expected, f"allreduce prescale/postscale {dtype} {kind}", kind)
    # The default op is Average; average=False means Sum.
    inputs = [make(r, (4,), "float64") for r in range(size)]
    check(hvd.allreduce(as_kind(inputs[rank], kind)),
          reduce_all(inputs, hvd.Average, "float64"), f"allreduce default {kind}", kind)
    check(hvd.allreduce(as_kind(inputs[rank], kind), average=False),
          reduce_all(inputs, hvd.Sum, "float64"), f"allreduce average=False {kind}", kind)
    # A non-contiguous tensor is reduced through a copy written back.
    inputs = [make(r, (4, 6), "float32") for r in range(size)]
    transposed = as_kind(inputs[rank], kind).T
    hvd.allreduce_(transposed, op=hvd.Sum)
    check(transposed, reduce_all(inputs, hvd.Sum, "float32").T,
          f"allreduce_ of a transposed {kind}", kind)
    # Compression.fp16 sends float16 and gives back float32.
    result = hvd.allreduce(as_kind(inputs[rank], kind), op=hvd.Sum,
                           compression=hvd.Compression.fp16)
    assert str(result.dtype).endswith("float32"), result.dtype
    assert np.allclose(to_numpy(result, kind), reduce_all(inputs, hvd.Sum, "float32"),
                       rtol=1e-2), "allreduce with Compression.fp16"


def check_grouped_allreduce(kind, rank, size):
    shapes = [((2, 3), "float32"), ((5,), "int64"), ((), "float32"), ((4, 1), "float64")]
    inputs = [[make(r, shape, dtype) for shape, dtype in shapes] for r in range(size)]
    mine = [as_kind(x, kind) for x in inputs[rank]]
    results = hvd.grouped_allreduce(mine, op=hvd.Sum)
    for i, (shape, dtype) in enumerate(shapes):
        expected = reduce_all([inputs[r][i] for r in range(size)], hvd.Sum, dtype)
        check(results[i], expected, f"grouped_allreduce #{i} {kind}", kind)
        check(mine[i], inputs[rank][i], f"grouped_allreduce left input #{i} alone", kind)
    hvd.grouped_allreduce_(mine, op=hvd.Max)
    for i, (shape, dtype) in enumerate(shapes):
        expected = reduce_all([inputs[r][i] for r in range(size)], hvd.Max, dtype)
        check(mine[i], expected, f"grouped_allreduce_ #{i} {kind}", kind)


def check_allgather(kind, rank, size):
    for dtype in DTYPES:
        # Ranks contribute different first dimensions.
        inputs = [make(r, (r + 1, 3), dtype) for r in range(size)]
        result = hvd.allgather(as_kind(inputs[rank], kind))
        check(result, np.concatenate(inputs), f"allgather {dtype} {kind}", kind)


def check_broadcast(kind, rank, size):
    root = size - 1
    for dtype in DTYPES:
        inputs = [make(r, (2, 4), dtype, high=100) for r in range(size)]
        mine = as_kind(inputs[rank], kind)
        check(hvd.broadcast(mine, root_rank=root), inputs[root], f"broadcast {dtype} {kind}",
              kind)
        check(mine, inputs[rank], f"broadcast left its input alone ({dtype} {kind})", kind)
        assert hvd.broadcast_(mine, root) is mine
        check(mine, inputs[root], f"broadcast_ {dtype} {kind}", kind)


def splits_of(rank, size):
    """Rows rank `rank` sends to each rank: uneven, and zero to one of them."""
    return [(rank + i) % 3 for i in range(size)]


def check_alltoall(kind, rank, size):
    for dtype in ("float32", "int64"):
        inputs = [make(r, (sum(splits_of(r, size)), 2), dtype, high=100) for r in range(size)]
        output, received = hvd.alltoall(as_kind(inputs[rank], kind),
                                        splits=splits_of(rank, size))
        expected = []
        for sender in range(size):
            start = sum(splits_of(sender, size)[:rank])
            expected.append(inputs[sender][start:start + splits_of(sender, size)[rank]])
        check(output, np.concatenate(expected), f"alltoall {dtype} {kind}", kind)
        check(received, np.array([splits_of(s, size)[rank] for s in range(size)], "int64"),
              f"alltoall received splits {kind}", kind)
    # No splits: an equal split; Horovod returns the rows alone then.
    inputs = [make(r, (2 * size, 3), "int32", high=100) for r in range(size)]
    output = hvd.alltoall(as_kind(inputs[rank], kind))
    expected = np.concatenate([inputs[s][2 * rank:2 * rank + 2] for s in range(size)])
    check(output, expected, f"alltoall equal split {kind}", kind)
    output, received = hvd.synchronize(hvd.alltoall_async(as_kind(inputs[rank], kind)))
    check(output, expected, f"alltoall_async equal split {kind}", kind)
    check(received, np.full(size, 2, "int64"), f"alltoall equal received {kind}", kind)


def check_reducescatter(kind, rank, size):
    rows = 2 * size + 1  # does not divide: the first rows % size ranks get one more
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    for op in (hvd.Sum, hvd.Average):
        for dtype in ("float32", "int64"):
            inputs = [make(r, (rows, 2), dtype) for r in range(size)]
            result = hvd.reducescatter(as_kind(inputs[rank], kind), op=op)
            expected = reduce_all(inputs, op, dtype)[start:start + counts[rank]]
            check(result, expected, f"reducescatter {op} {dtype} {kind}", kind)


def check_async(kind, rank, size):
    inputs = [make(r, (3,), "float64") for r in range(size)]
    handle = hvd.allreduce_async(as_kind(inputs[rank], kind), op=hvd.Sum)
    assert hvd.poll(handle) in (True, False)
    check(hvd.synchronize(handle), reduce_all(inputs, hvd.Sum, "float64"), "allreduce_async",
          kind)
    try:
        hvd.synchronize(handle)
        raise AssertionError("synchronize twice should raise")
    except ValueError as error:
        assert "handle" in str(error), error
    try:
        hvd.poll(handle)
        raise AssertionError("poll after synchronize should raise")
    except ValueError as error:
        assert "handle" in str(error), error
    # Many requests in flight at once, made in a different order on each
    # rank: the engine matches them by name and fuses the ready ones.
    named = {f"layer{i}": as_kind(make(rank, (i + 1,), "float32"), kind) for i in range(20)}
    order = sorted(named, reverse=(rank % 2 == 1))
    handles = {n: hvd.allreduce_async_(named[n], name=n, op=hvd.Sum) for n in order}
    for n in order:
        assert hvd.synchronize(handles[n]) is named[n]
    for i in range(20):
        check(named[f"layer{i}"],
              reduce_all([make(r, (i + 1,), "float32") for r in range(size)], hvd.Sum, "float32"),
              f"allreduce_async_ layer{i}", kind)
    mine = as_kind(inputs[rank], kind)
    hvd.synchronize(hvd.allreduce_async_(mine, op=hvd.Max))
    check(mine, reduce_all(inputs, hvd.Max, "float64"), "allreduce_async_", kind)
    results = hvd.synchronize(hvd.grouped_allreduce_async([as_kind(x, kind) for x in
                                                            (inputs[rank], inputs[rank])],
                                                           op=hvd.Sum))
    for result in results:
        check(result, reduce_all(inputs, hvd.Sum, "float64"), "grouped_allreduce_async", kind)
    gathered = hvd.synchronize(hvd.allgather_async(as_kind(inputs[rank], kind)))
    check(gathered, np.concatenate(inputs), "allgather_async", kind)
    check(hvd.synchronize(hvd.broadcast_async(as_kind(inputs[rank], kind), 0)), inputs[0],
          "broadcast_async", kind)
    output, _ = hvd.synchronize(hvd.alltoall_async(as_kind(make(rank, (size,), "int64"), kind)))
    check(output, np.array([make(s, (size,), "int64")[rank] for s in range(size)]),
          "alltoall_async", kind)
    scattered = hvd.synchronize(hvd.reducescatter_async(
        as_kind(make(rank, (size, 2), "float32"), kind), op=hvd.Sum))
    check(scattered, reduce_all([make(r, (size, 2), "float32") for r in range(size)], hvd.Sum,
                                "float32")[rank:rank + 1], "reducescatter_async", kind)
    # An error is kept for synchronize, as an asynchronous one would be.
    handle = hvd.alltoall_async(as_kind(make(rank, (3, 2), "float32"), kind), splits=[5] * size)
    try:
        hvd.synchronize(handle)
        raise AssertionError("alltoall with splits past the first dimension should fail")
    except ValueError as error:
        assert "splits" in str(error), error


def check_objects(rank, size):
    value = {"rank": rank, "payload": list(range(rank * 10))}
    assert hvd.broadcast_object(value, root_rank=size - 1) == {
        "rank": size - 1, "payload": list(range((size - 1) * 10))}
    gathered = hvd.allgather_object(value)
    assert gathered == [{"rank": r, "payload": list(range(r * 10))} for r in range(size)]


def check_errors(rank, size):
    def expect(error_type, words, call):
        try:
            call()
        except error_type as error:
            for word in words:
                assert word in str(error), f"'{word}' not in {error!r}"
            return
        raise AssertionError(f"expected {error_type.__name__} mentioning {words}")

    # bool moves (broadcast, allgather, alltoall) but is not reduced, as in Horovod.
    expect(ValueError, ["bool tensors cannot be reduced"],
           lambda: hvd.allreduce(torch.ones(3, dtype=torch.bool)))
    expect(TypeError, ["list"], lambda: hvd.allreduce([1.0, 2.0]))
    read_only = np.zeros(2)
    read_only.setflags(write=False)
    expect(ValueError, ["read-only"], lambda: hvd.allreduce_(read_only))
    # Ranks agree on the failure, and the ring stays usable afterwards.
    expect(ValueError, ["splits"], lambda: hvd.alltoall(np.zeros((2, 2)), splits=[3] * size))
    expect(ValueError, ["root"], lambda: hvd.broadcast(np.zeros(2), root_rank=size))
    hvd.barrier()


def main():
    hvd.init()
    announce(hvd)
    rank, size = hvd.rank(), hvd.size()
    assert 0 <= rank < size
    assert hvd.local_size() == size and hvd.local_rank() == rank  # all on localhost
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    for kind in ("numpy", "torch"):
        check_allreduce(kind, rank, size)
        check_grouped_allreduce(kind, rank, size)
        check_allgather(kind, rank, size)
        check_broadcast(kind, rank, size)
        check_alltoall(kind, rank, size)
        check_reducescatter(kind, rank, size)
        check_async(kind, rank, size)
    check_objects(rank, size)
    check_errors(rank, size)
    hvd.barrier()
    print(f"ops ok rank {rank}/{size}", flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
