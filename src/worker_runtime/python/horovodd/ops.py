"""The collectives, for torch tensors and numpy arrays alike (results are of
the kind the argument was).

Every rank must call the same collectives in the same order with matching
arguments. Collectives release the GIL while they wait. Failures raise
HorovodInternalError (a peer was lost, membership changed), ValueError (bad
arguments) or RuntimeError. Every wait, synchronous calls' too, lets signal
handlers run: Ctrl-C raises KeyboardInterrupt in a collective blocked on a
peer at once. The interrupted collective goes on in the background (its
tensors are kept alive until it completes, or fails at the next reset), so
its name stays pending until then.

Asynchronous forms (*_async) queue the collective on the runtime's engine
thread and return a handle at once; synchronize(handle) waits for it and
returns the result or raises its error, poll(handle) says whether it is done,
as Horovod's do. Ranks match queued requests by name (unnamed ones by the
order they were made in) and ready allreduces (and reducescatters) are
fused into one collective. The tensor must not be modified until
synchronize. alltoall_async still runs at once. These functions do not
record autograd; horovodd.torch's do (horovodd/torch/mpi_ops.py).

Every collective takes process_set= (default: global_process_set, every
rank); only the set's ranks call it. prescale_factor/postscale_factor scale
as Horovod does, bit for bit (the runtime's reduce kernels): the factor cast
to the tensor's dtype and multiplied there (float64 for integer tensors,
float32 for float16 and bfloat16, each element cast back), before the sum
for the prescale, after it for the postscale; Average is the sum times
postscale_factor / the set's size. op=Adasum combines tensors with Adasum
(horovodd/adasum.py).
"""

import itertools
import pickle

import numpy as np

from horovodd import _horovodd, _tensors, adasum
from horovodd.basics import rank
from horovodd.compression import Compression
from horovodd.exceptions import HorovodInternalError
from horovodd.process_sets import global_process_set, process_set_kwargs

ReduceOp = _horovodd.ReduceOp
Average = ReduceOp.Average
Sum = ReduceOp.Sum
Min = ReduceOp.Min
Max = ReduceOp.Max
Product = ReduceOp.Product
Adasum = adasum.Adasum


def _reduce_op(average, op):
    """Horovod's rule: `average` (deprecated) or `op`, Average by default."""
    if average is not None:
        if op is not None:
            raise ValueError("pass either op or average (deprecated), not both")
        return Average if average else Sum
    return Average if op is None else op


def _set_size(process_set):
    return _horovodd.size() if process_set is None or process_set is global_process_set \
        else process_set.size()


# ---------------------------------------------------------------------------
# allreduce
# ---------------------------------------------------------------------------

def _adasum_in_engine(tensor, process_set):
    """Whether the engine runs this tensor's Adasum (gloo_adasum.h: CPU
    floats on a power-of-two set); the rest combine over an allgather here,
    the ranks past the largest power of two folded in first, as Horovod's
    CPU Adasum does."""
    size = _set_size(process_set)
    on_cpu = not _tensors.is_torch(tensor) or tensor.device.type == "cpu"
    return on_cpu and _tensors.dtype_name(tensor) in adasum.ENGINE_DTYPES and \
        size & (size - 1) == 0


def _adasum_(tensors, name, process_set, prescale_factor, postscale_factor):
    """Adasum of each tensor over the set's ranks, written in place."""
    kwargs = process_set_kwargs(process_set)
    for tensor in tensors:
        if _adasum_in_engine(tensor, process_set):
            _tensors.in_place(
                tensor, lambda ref, contiguous: _horovodd.adasum_(
                    ref, float(prescale_factor), float(postscale_factor), keep=contiguous,
                    **kwargs), "allreduce_")
            continue
        gathered = allgather(_tensors.flat_concat([tensor]), name=name,
                             process_set=process_set)
        n = _set_size(process_set)
        vectors = _tensors.as_float64(gathered).reshape(n, -1) * float(prescale_factor)
        combined = adasum.combine(list(vectors)) * float(postscale_factor)
        _tensors.assign_from_float64(tensor, combined.reshape(tuple(tensor.shape)))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In place: `tensor` becomes op (Average by default) over every rank's
    tensor, each multiplied by prescale_factor first, the result multiplied by
    postscale_factor. Average is the sum times 1 / size() (integers in
    float64, truncated). Returns `tensor`."""
    reduce_op = _reduce_op(average, op)
    if reduce_op is Adasum:
        _tensors.check(tensor, "allreduce_")
        _adasum_([tensor], name, process_set, prescale_factor, postscale_factor)
        return tensor
    kwargs = process_set_kwargs(process_set)

    def run(ref, contiguous):
        _horovodd.allreduce_(ref, reduce_op, float(prescale_factor), float(postscale_factor),
                             name or "", keep=contiguous, **kwargs)
    return _tensors.in_place(tensor, run, "allreduce_")


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Like allreduce_, into a new tensor; `compression` (Compression.fp16)
    changes what is sent, not the result's dtype."""
    _tensors.check(tensor, "allreduce")
    compressed, context = compression.compress(tensor)
    if compressed is tensor:
        compressed = _tensors.clone(tensor)
    allreduce_(compressed, average, name, op, prescale_factor, postscale_factor, process_set)
    return compression.decompress(compressed, context)


def _dtype_groups(tensors):
    """Indices of `tensors` grouped by dtype, groups in order of first use."""
    groups = {}
    for index, tensor in enumerate(tensors):
        groups.setdefault(_tensors.dtype_key(tensor), []).append(index)
    return list(groups.values())


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """allreduce_ of each tensor in `tensors`, fused: one collective per dtype
    over a buffer holding all tensors of that dtype. Returns `tensors`."""
    tensors = list(tensors)
    for tensor in tensors:
        _tensors.check(tensor, "grouped_allreduce_")
    if _reduce_op(average, op) is Adasum:
        _adasum_(tensors, name, process_set, prescale_factor, postscale_factor)
        return tensors
    for group_number, indices in enumerate(_dtype_groups(tensors)):
        members = [tensors[i] for i in indices]
        flat = _tensors.flat_concat(members)
        allreduce_(flat, average, f"{name or 'grouped_allreduce'}.{group_number}", op,
                   prescale_factor, postscale_factor, process_set)
        for member, reduced in zip(members, _tensors.unflatten(flat, members)):
            _tensors.copy_into(member, reduced)
    return tensors


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Like grouped_allreduce_, into new tensors (a list, in order)."""
    tensors = list(tensors)
    for tensor in tensors:
        _tensors.check(tensor, "grouped_allreduce")
    compressed = [compression.compress(t) for t in tensors]
    sent = [_tensors.clone(c) if c is t else c for t, (c, _) in zip(tensors, compressed)]
    grouped_allreduce_(sent, average, name, op, prescale_factor, postscale_factor, process_set)
    return [compression.decompress(s, context) for s, (_, context) in zip(sent, compressed)]


# ---------------------------------------------------------------------------
# the others
# ---------------------------------------------------------------------------

def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along the first dimension, in rank
    order. Ranks may contribute different first dimensions; the other
    dimensions and the dtype must match."""
    ref, owner = _tensors.readable_ref(tensor, "allgather")
    return _tensors.like(_horovodd.allgather(ref, keep=owner, **process_set_kwargs(process_set)),
                         tensor)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor in `tensors` (a list of results, in order),
    negotiated together."""
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In place: `tensor` becomes root_rank's (a global rank). Returns
    `tensor`."""
    kwargs = process_set_kwargs(process_set)
    return _tensors.in_place(
        tensor, lambda ref, contiguous: _horovodd.broadcast_(ref, int(root_rank),
                                                             keep=contiguous, **kwargs),
        "broadcast_")


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor, as a new tensor."""
    _tensors.check(tensor, "broadcast")
    return broadcast_(_tensors.clone(tensor), root_rank, name, process_set)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[i] first-dimension rows of `tensor` to rank i (None: an
    equal split). Returns (the rows received, from rank 0 up; an int64 tensor
    of how many rows came from each rank)."""
    ref, owner = _tensors.readable_ref(tensor, "alltoall")
    output, received = _horovodd.alltoall(ref, _tensors.to_list(splits), keep=owner,
                                          **process_set_kwargs(process_set))
    return _tensors.like(output, tensor), _tensors.int64_vector(received, tensor)


def check_reducescatter_op(op):
    """Horovod's reducescatter takes Sum and Average only: any other op is
    refused before anything is sent, on the rank that passed it, with
    Horovod's exception (its enqueue fails, which it raises as
    HorovodInternalError) and a message naming the op."""
    if isinstance(op, ReduceOp) and op in (Sum, Average):
        return
    name = getattr(op, "name", None) or repr(op)
    raise HorovodInternalError(
        f"Reducescatter currently only supports SUM and AVERAGE, got op={name}.")


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """op (Average or Sum) over every rank's tensor, scaled as allreduce
    scales; this rank gets its share of the first dimension (the first
    rows % size() ranks get one row more). Other ops raise
    HorovodInternalError, as in Horovod."""
    check_reducescatter_op(op)
    _tensors.check(tensor, "reducescatter")
    compressed, context = compression.compress(tensor)
    ref, owner = _tensors.readable_ref(compressed, "reducescatter")
    result = _horovodd.reducescatter(ref, op, float(prescale_factor), float(postscale_factor),
                                     name or "", keep=owner, **process_set_kwargs(process_set))
    return compression.decompress(_tensors.like(result, compressed), context)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each tensor in `tensors`, negotiated together and
    fused; a list of results, in order."""
    check_reducescatter_op(op)
    tensors = list(tensors)
    for tensor in tensors:
        _tensors.check(tensor, "grouped_reducescatter")
    compressed = [compression.compress(t) for t in tensors]
    results = synchronize(grouped_reducescatter_async(
        [c for c, _ in compressed], name, op, process_set, prescale_factor, postscale_factor))
    return [compression.decompress(r, context) for r, (_, context) in zip(results, compressed)]


def barrier(process_set=global_process_set):
    """Returns once every rank (of the set) has entered it."""
    _horovodd.barrier(**process_set_kwargs(process_set))


def join(device=-1):
    """This rank has no more data: until every rank has joined, the others'
    allreduces go on without it (it contributes nothing; Average divides by
    the ranks that did). Returns the last rank to join. `device` is
    Horovod's and unused here."""
    return int(_horovodd.join())


# ---------------------------------------------------------------------------
# asynchronous forms
# ---------------------------------------------------------------------------

class _Handle:
    """A collective in flight on the engine's thread: the runtime's handles,
    the tensors whose memory they use (kept alive here until synchronize),
    and how to make the caller's result once they complete."""

    __slots__ = ("handles", "keep", "finish")

    def __init__(self, handles, keep, finish):
        self.handles = handles
        self.keep = keep
        self.finish = finish


class _CallableHandle(_Handle):
    """A handle Horovod hands back as a function (sparse_allreduce_async's):
    calling it synchronizes it and returns the result; poll() and
    synchronize() take it too."""

    __slots__ = ()

    def __call__(self):
        return synchronize(self)


# Handles not synchronized yet. Holding them here (as Horovod does) keeps a
# tensor alive even if its caller drops the handle while the engine writes
# into it (also when a signal interrupted synchronize).
_in_flight = {}
_unnamed = itertools.count(1)


def _request_name(name, operation):
    """Horovod's rule for unnamed requests: every rank makes its unnamed
    requests in the same order, so a counter matches them up."""
    return name if name else f"{operation}.noname.{next(_unnamed)}"


def _track(handles, keep, finish, kind=_Handle):
    handle = kind(handles, keep, finish)
    _in_flight[id(handle)] = handle
    return handle


def _combine(parts, finish, kind=_Handle):
    """One handle (of class `kind`) over several tracked ones: synchronize
    waits for all of them, then returns finish([each part's result])."""
    for part in parts:
        _in_flight.pop(id(part), None)
    handles = [h for part in parts for h in part.handles]
    return _track(handles, parts, lambda: finish([part.finish() for part in parts]), kind)


def _writable_target(tensor, what):
    """(the tensor the engine may write into: `tensor` or a contiguous copy,
    a function that copies it back into `tensor`)."""
    _tensors.check(tensor, what)
    if isinstance(tensor, np.ndarray) and not tensor.flags.writeable:
        raise ValueError(f"{what} writes into its argument, but the array is read-only")
    target = tensor.detach() if _tensors.is_torch(tensor) else tensor
    contiguous = _tensors.writable_contiguous(target)
    if contiguous is target:
        return contiguous, lambda: None

    def write_back():
        if _tensors.is_torch(tensor):
            target.copy_(contiguous)
        else:
            target[...] = contiguous
    return contiguous, write_back


def _run_now(collective, *args, **kwargs):
    """A handle for a collective the engine does not queue (alltoall,
    Adasum): it runs now; synchronize returns its result or raises its
    error."""
    try:
        result, error = collective(*args, **kwargs), None
    except Exception as caught:  # kept for synchronize(), as an async error would be
        result, error = None, caught

    def finish():
        if error is not None:
            raise error
        return result
    return _track([], None, finish)


def _pending(handle):
    pending = _in_flight.get(id(handle)) if isinstance(handle, _Handle) else None
    if pending is not handle:
        raise ValueError(f"unknown or already synchronized handle {handle!r}")
    return handle


def poll(handle):
    """Whether the collective behind `handle` has completed (never blocks)."""
    return all(h.poll() for h in _pending(handle).handles)


def synchronize(handle):
    """Waits (without the GIL) for the collective behind `handle` and returns
    its result, or raises its error (HorovodInternalError when a peer was
    lost or the membership changed). A signal (Ctrl-C, SIGTERM with a
    handler) interrupts the wait with its exception; the handle then stays
    pending, its tensors alive, and can be synchronized again."""
    _pending(handle)
    first_error = None
    for h in handle.handles:
        try:
            h.wait()
        except Exception as error:  # wait for the others: they use handle.keep
            first_error = first_error or error
    del _in_flight[id(handle)]
    if first_error is not None:
        raise first_error
    return handle.finish()


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Queues allreduce_ of `tensor` on the engine and returns a handle at
    once; synchronize(handle) returns `tensor`, reduced. Ranks match requests
    by name (unnamed ones by their order); ready ones are fused."""
    reduce_op = _reduce_op(average, op)
    if reduce_op is Adasum:
        return _run_now(allreduce_, tensor, None, name, Adasum, prescale_factor,
                        postscale_factor, process_set)
    target, write_back = _writable_target(tensor, "allreduce_async_")
    handle = _horovodd.allreduce_async_(_tensors.ref(target), reduce_op, float(prescale_factor),
                                        float(postscale_factor), _request_name(name, "allreduce"),
                                        **process_set_kwargs(process_set))

    def finish():
        write_back()
        return tensor
    return _track([handle], (tensor, target), finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """allreduce into a new tensor, as a handle (see allreduce_async_)."""
    _tensors.check(tensor, "allreduce_async")
    return allreduce_async_(_tensors.clone(tensor), average, name, op, prescale_factor,
                            postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Queues allreduce_ of every tensor in `tensors` as one request per
    dtype, always fused together; synchronize returns `tensors`."""
    reduce_op = _reduce_op(average, op)
    tensors = list(tensors)
    if reduce_op is Adasum:
        return _run_now(grouped_allreduce_, tensors, None, name, Adasum, prescale_factor,
                        postscale_factor, process_set)
    base = _request_name(name, "grouped_allreduce")
    targets = [_writable_target(t, "grouped_allreduce_async_") for t in tensors]
    kwargs = process_set_kwargs(process_set)
    handles = []
    for group_number, indices in enumerate(_dtype_groups(tensors)):
        refs = [_tensors.ref(targets[i][0]) for i in indices]
        handles.append(_horovodd.grouped_allreduce_async_(
            refs, reduce_op, float(prescale_factor), float(postscale_factor),
            f"{base}.{group_number}", **kwargs))

    def finish():
        for _, write_back in targets:
            write_back()
        return tensors
    return _track(handles, (tensors, targets), finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """grouped_allreduce into new tensors, as a handle."""
    tensors = list(tensors)
    for tensor in tensors:
        _tensors.check(tensor, "grouped_allreduce_async")
    return grouped_allreduce_async_([_tensors.clone(t) for t in tensors], average, name, op,
                                    prescale_factor, postscale_factor, process_set)


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Queues allgather; synchronize returns the concatenation."""
    ref, owner = _tensors.readable_ref(tensor, "allgather_async")
    handle = _horovodd.allgather_async(ref, _request_name(name, "allgather"),
                                       **process_set_kwargs(process_set))
    return _track([handle], (tensor, owner),
                  lambda: _tensors.like(handle.take_output(), tensor))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Queues allgather of each tensor in `tensors`; synchronize returns the
    list of results, in order."""
    base = _request_name(name, "grouped_allgather")
    parts = [allgather_async(t, f"{base}.{i}", process_set) for i, t in enumerate(tensors)]
    return _combine(parts, lambda results: results)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Queues broadcast_ from root_rank; synchronize returns `tensor`."""
    target, write_back = _writable_target(tensor, "broadcast_async_")
    handle = _horovodd.broadcast_async_(_tensors.ref(target), int(root_rank),
                                        _request_name(name, "broadcast"),
                                        **process_set_kwargs(process_set))

    def finish():
        write_back()
        return tensor
    return _track([handle], (tensor, target), finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """broadcast into a new tensor, as a handle."""
    _tensors.check(tensor, "broadcast_async")
    return broadcast_async_(_tensors.clone(tensor), root_rank, name, process_set)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """alltoall, returning a handle (it runs at once; see synchronize)."""
    return _run_now(alltoall, tensor, splits, name, process_set)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Queues reducescatter on the engine and returns a handle at once;
    synchronize returns this rank's share. Ranks match requests by name
    (unnamed ones by their order); ready ones of one dtype, op and scale
    factors are fused. An op other than Sum or Average raises here, as
    Horovod's enqueue does."""
    check_reducescatter_op(op)
    ref, owner = _tensors.readable_ref(tensor, "reducescatter_async")
    handle = _horovodd.reducescatter_async(ref, op, float(prescale_factor),
                                           float(postscale_factor),
                                           _request_name(name, "reducescatter"),
                                           **process_set_kwargs(process_set))
    return _track([handle], (tensor, owner),
                  lambda: _tensors.like(handle.take_output(), tensor))


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set, prescale_factor=1.0,
                                postscale_factor=1.0):
    """Queues reducescatter of each tensor in `tensors` (negotiated together,
    fused when ready together); synchronize returns the list of shares, in
    order."""
    check_reducescatter_op(op)
    tensors = list(tensors)
    for tensor in tensors:
        _tensors.check(tensor, "grouped_reducescatter_async")
    base = _request_name(name, "grouped_reducescatter")
    parts = [reducescatter_async(t, f"{base}.{i}", op, process_set, prescale_factor,
                                 postscale_factor) for i, t in enumerate(tensors)]
    return _combine(parts, lambda results: results)


# ---------------------------------------------------------------------------
# Python objects
# ---------------------------------------------------------------------------

def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's `obj` on every rank (pickled; root_rank gets its own obj
    back, the others a copy)."""
    if rank() == root_rank:
        payload = np.frombuffer(bytearray(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)),
                                dtype=np.uint8)
        length = np.array([payload.size], dtype=np.int64)
    else:
        length = np.zeros(1, dtype=np.int64)
    broadcast_(length, root_rank, process_set=process_set)
    if rank() != root_rank:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    broadcast_(payload, root_rank, process_set=process_set)
    return obj if rank() == root_rank else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's `obj` (pickled), as a list in rank order."""
    payload = np.frombuffer(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
    lengths = allgather(np.array([payload.size], dtype=np.int64), process_set=process_set)
    gathered = allgather(payload, process_set=process_set).tobytes()
    objects, offset = [], 0
    for length in lengths.tolist():
        objects.append(pickle.loads(gathered[offset:offset + length]))
        offset += length
    return objects
