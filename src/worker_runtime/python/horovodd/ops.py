"""The collectives, for torch tensors and numpy arrays alike (results are of
the kind the argument was).

Every rank must call the same collectives in the same order with matching
arguments. Collectives release the GIL while they wait. Failures raise
HorovodInternalError (a peer was lost, membership changed), ValueError (bad
arguments) or RuntimeError; a Ctrl-C that arrives during a collective raises
KeyboardInterrupt as soon as the collective returns (collectives end within
the ring timeout at worst).

Asynchronous forms (*_async) run the collective at once, synchronously: the
handle they return is already done (poll() is True), and synchronize(handle)
returns the result or raises the collective's error, as Horovod's do. Results
are detached from autograd.
"""

import itertools
import pickle

import numpy as np

from horovodd import _horovodd, _tensors
from horovodd.basics import rank
from horovodd.compression import Compression

ReduceOp = _horovodd.ReduceOp
Average = ReduceOp.Average
Sum = ReduceOp.Sum
Min = ReduceOp.Min
Max = ReduceOp.Max
Product = ReduceOp.Product


def _reduce_op(average, op):
    """Horovod's rule: `average` (deprecated) or `op`, Average by default."""
    if average is not None:
        if op is not None:
            raise ValueError("pass either op or average (deprecated), not both")
        return Average if average else Sum
    return Average if op is None else op


# ---------------------------------------------------------------------------
# allreduce
# ---------------------------------------------------------------------------

def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0):
    """In place: `tensor` becomes op (Average by default) over every rank's
    tensor, each multiplied by prescale_factor first, the result multiplied by
    postscale_factor. Average divides the sum by size() (integers truncate)
    before the postscale. Returns `tensor`."""
    reduce_op = _reduce_op(average, op)
    return _tensors.in_place(
        tensor,
        lambda ref: _horovodd.allreduce_(ref, reduce_op, float(prescale_factor),
                                         float(postscale_factor), name or ""),
        "allreduce_")


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0):
    """Like allreduce_, into a new tensor; `compression` (Compression.fp16)
    changes what is sent, not the result's dtype."""
    _tensors.check(tensor, "allreduce")
    compressed, context = compression.compress(tensor)
    if compressed is tensor:
        compressed = _tensors.clone(tensor)
    allreduce_(compressed, average, name, op, prescale_factor, postscale_factor)
    return compression.decompress(compressed, context)


def _dtype_groups(tensors):
    """Indices of `tensors` grouped by dtype, groups in order of first use."""
    groups = {}
    for index, tensor in enumerate(tensors):
        groups.setdefault(_tensors.dtype_key(tensor), []).append(index)
    return list(groups.values())


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0):
    """allreduce_ of each tensor in `tensors`, fused: one collective per dtype
    over a buffer holding all tensors of that dtype. Returns `tensors`."""
    tensors = list(tensors)
    for tensor in tensors:
        _tensors.check(tensor, "grouped_allreduce_")
    for group_number, indices in enumerate(_dtype_groups(tensors)):
        members = [tensors[i] for i in indices]
        flat = _tensors.flat_concat(members)
        allreduce_(flat, average, f"{name or 'grouped_allreduce'}.{group_number}", op,
                   prescale_factor, postscale_factor)
        for member, reduced in zip(members, _tensors.unflatten(flat, members)):
            _tensors.copy_into(member, reduced)
    return tensors


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0):
    """Like grouped_allreduce_, into new tensors (a list, in order)."""
    tensors = list(tensors)
    for tensor in tensors:
        _tensors.check(tensor, "grouped_allreduce")
    compressed = [compression.compress(t) for t in tensors]
    sent = [_tensors.clone(c) if c is t else c for t, (c, _) in zip(tensors, compressed)]
    grouped_allreduce_(sent, average, name, op, prescale_factor, postscale_factor)
    return [compression.decompress(s, context) for s, (_, context) in zip(sent, compressed)]


# ---------------------------------------------------------------------------
# the others
# ---------------------------------------------------------------------------

def allgather(tensor, name=None):
    """Every rank's tensor concatenated along the first dimension, in rank
    order. Ranks may contribute different first dimensions; the other
    dimensions and the dtype must match."""
    ref, _owner = _tensors.readable_ref(tensor, "allgather")
    return _tensors.like(_horovodd.allgather(ref), tensor)


def broadcast_(tensor, root_rank, name=None):
    """In place: `tensor` becomes root_rank's. Returns `tensor`."""
    return _tensors.in_place(tensor, lambda ref: _horovodd.broadcast_(ref, int(root_rank)),
                             "broadcast_")


def broadcast(tensor, root_rank, name=None):
    """root_rank's tensor, as a new tensor."""
    _tensors.check(tensor, "broadcast")
    return broadcast_(_tensors.clone(tensor), root_rank, name)


def alltoall(tensor, splits=None, name=None):
    """Sends splits[i] first-dimension rows of `tensor` to rank i (None: an
    equal split). Returns (the rows received, from rank 0 up; an int64 tensor
    of how many rows came from each rank)."""
    ref, _owner = _tensors.readable_ref(tensor, "alltoall")
    output, received = _horovodd.alltoall(ref, _tensors.to_list(splits))
    return _tensors.like(output, tensor), _tensors.int64_vector(received, tensor)


def reducescatter(tensor, name=None, op=Average):
    """op (Average by default) over every rank's tensor; this rank gets its
    share of the first dimension (the first rows % size() ranks get one row
    more)."""
    ref, _owner = _tensors.readable_ref(tensor, "reducescatter")
    return _tensors.like(_horovodd.reducescatter(ref, op), tensor)


def barrier():
    """Returns once every rank has entered it."""
    _horovodd.barrier()


# ---------------------------------------------------------------------------
# asynchronous forms
# ---------------------------------------------------------------------------

# Handle -> (result, error) of collectives not synchronized yet. Only the
# training thread runs collectives; dict operations are atomic under the GIL.
_done = {}
_handles = itertools.count(1)


def _run_now(collective, *args, **kwargs):
    handle = next(_handles)
    try:
        _done[handle] = (collective(*args, **kwargs), None)
    except Exception as error:  # kept for synchronize(), as an async error would be
        _done[handle] = (None, error)
    return handle


def poll(handle):
    """Whether the collective behind `handle` finished: always True (the
    collective ran when the handle was made)."""
    if handle not in _done:
        raise ValueError(f"unknown or already synchronized handle {handle!r}")
    return True


def synchronize(handle):
    """The result of the collective behind `handle` (raises its error)."""
    try:
        result, error = _done.pop(handle)
    except KeyError:
        raise ValueError(f"unknown or already synchronized handle {handle!r}") from None
    if error is not None:
        raise error
    return result


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0):
    """allreduce, returning a handle (already done; see synchronize)."""
    return _run_now(allreduce, tensor, average, name, op=op,
                    prescale_factor=prescale_factor, postscale_factor=postscale_factor)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0):
    """allreduce_, returning a handle (already done; see synchronize)."""
    return _run_now(allreduce_, tensor, average, name, op, prescale_factor, postscale_factor)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0):
    """grouped_allreduce, returning a handle (already done; see synchronize)."""
    return _run_now(grouped_allreduce, tensors, average, name, op=op,
                    prescale_factor=prescale_factor, postscale_factor=postscale_factor)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0):
    """grouped_allreduce_, returning a handle (already done; see synchronize)."""
    return _run_now(grouped_allreduce_, tensors, average, name, op, prescale_factor,
                    postscale_factor)


def allgather_async(tensor, name=None):
    """allgather, returning a handle (already done; see synchronize)."""
    return _run_now(allgather, tensor, name)


def broadcast_async(tensor, root_rank, name=None):
    """broadcast, returning a handle (already done; see synchronize)."""
    return _run_now(broadcast, tensor, root_rank, name)


def broadcast_async_(tensor, root_rank, name=None):
    """broadcast_, returning a handle (already done; see synchronize)."""
    return _run_now(broadcast_, tensor, root_rank, name)


def alltoall_async(tensor, splits=None, name=None):
    """alltoall, returning a handle (already done; see synchronize)."""
    return _run_now(alltoall, tensor, splits, name)


def reducescatter_async(tensor, name=None, op=Average):
    """reducescatter, returning a handle (already done; see synchronize)."""
    return _run_now(reducescatter, tensor, name, op)


# ---------------------------------------------------------------------------
# Python objects
# ---------------------------------------------------------------------------

def broadcast_object(obj, root_rank=0, name=None):
    """root_rank's `obj` on every rank (pickled; root_rank gets its own obj
    back, the others a copy)."""
    if rank() == root_rank:
        payload = np.frombuffer(bytearray(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)),
                                dtype=np.uint8)
        length = np.array([payload.size], dtype=np.int64)
    else:
        length = np.zeros(1, dtype=np.int64)
    broadcast_(length, root_rank)
    if rank() != root_rank:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    broadcast_(payload, root_rank)
    return obj if rank() == root_rank else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None):
    """Every rank's `obj` (pickled), as a list in rank order."""
    payload = np.frombuffer(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
    lengths = allgather(np.array([payload.size], dtype=np.int64))
    gathered = allgather(payload).tobytes()
    objects, offset = [], 0
    for length in lengths.tolist():
        objects.append(pickle.loads(gathered[offset:offset + length]))
        offset += length
    return objects
