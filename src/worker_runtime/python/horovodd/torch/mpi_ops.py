"""horovodd.torch's collectives: horovodd.ops for torch tensors, recorded by
autograd with Horovod 0.28's gradients (numpy arrays pass straight to
horovodd.ops):

    allreduce            the same allreduce (op, scale factors) of the gradient
    grouped_allreduce    the same grouped_allreduce of the gradients
    allgather            this rank's rows of the gradient averaged over the set
    grouped_allgather    the same, per tensor
    broadcast            the gradient averaged over the set on the root, zero
                         elsewhere
    alltoall             the gradient sent back with the received splits
    reducescatter        the allgathered gradient, times the set's size for
                         Sum, times the scale factors (Average: not divided)
    grouped_reducescatter  the same, per tensor

The averages are Horovod's (it changed allgather's and broadcast's from a
sum to an average in 0.22). The backward passes run collectives too: every
rank must run backward through the same collectives in the same order, as
with Horovod.
"""

import torch

from horovodd import ops
from horovodd.compression import Compression
from horovodd.ops import Average, Sum
from horovodd.process_sets import global_process_set


def _is_torch(tensor):
    return isinstance(tensor, torch.Tensor)


def _set_rank(process_set):
    return process_set.rank() if process_set is not global_process_set else ops.rank()


def _set_size(process_set):
    return ops._set_size(process_set)


# ---------------------------------------------------------------------------
# autograd functions (their forward passes call horovodd.ops)
# ---------------------------------------------------------------------------

class HorovodAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor,
                process_set):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return ops.allreduce(tensor, average, name, Compression.none, op, prescale_factor,
                             postscale_factor, process_set)

    @staticmethod
    def backward(ctx, grad_output):
        average, op, prescale_factor, postscale_factor, process_set = ctx.args
        grad = ops.allreduce(grad_output.contiguous(), average, None, Compression.none, op,
                             prescale_factor, postscale_factor, process_set)
        return grad, None, None, None, None, None, None


class HorovodGroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        ctx.args = (average, op, prescale_factor, postscale_factor, process_set)
        return tuple(ops.grouped_allreduce(list(tensors), average, name, Compression.none, op,
                                           prescale_factor, postscale_factor, process_set))

    @staticmethod
    def backward(ctx, *grad_outputs):
        average, op, prescale_factor, postscale_factor, process_set = ctx.args
        grads = ops.grouped_allreduce([g.contiguous() for g in grad_outputs], average, None,
                                      Compression.none, op, prescale_factor, postscale_factor,
                                      process_set)
        return (None,) * 6 + tuple(grads)


def _own_rows(grads_averaged, rows, process_set):
    """This rank's slice of each allgather's averaged gradient: its rows start
    after the rows the set's lower ranks gave. `rows`: this rank's first
    dimension of each tensor; one allgather exchanges them all."""
    counts = ops.allgather(torch.tensor([rows], dtype=torch.int64), process_set=process_set)
    offsets = counts[:_set_rank(process_set)].sum(dim=0).tolist()
    return [grad.narrow(0, int(offset), count)
            for grad, offset, count in zip(grads_averaged, offsets, rows)]


class HorovodAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0]
        ctx.process_set = process_set
        return ops.allgather(tensor, name, process_set)

    @staticmethod
    def backward(ctx, grad_output):
        averaged = ops.allreduce(grad_output.contiguous(), op=Average,
                                 process_set=ctx.process_set)
        return _own_rows([averaged], [ctx.rows], ctx.process_set)[0], None, None


class HorovodGroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] for t in tensors]
        ctx.process_set = process_set
        return tuple(ops.grouped_allgather(list(tensors), name, process_set))

    @staticmethod
    def backward(ctx, *grad_outputs):
        averaged = ops.grouped_allreduce([g.contiguous() for g in grad_outputs], op=Average,
                                         process_set=ctx.process_set)
        return (None, None) + tuple(_own_rows(averaged, ctx.rows, ctx.process_set))


class HorovodBroadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return ops.broadcast(tensor, root_rank, name, process_set)

    @staticmethod
    def backward(ctx, grad_output):
        averaged = ops.allreduce(grad_output.contiguous(), op=Average,
                                 process_set=ctx.process_set)
        if ops.rank() != ctx.root_rank:
            averaged = averaged * 0
        return averaged, None, None, None


class HorovodAlltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = ops.alltoall(tensor, splits, name, process_set)
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, grad_received):
        grad, _ = ops.alltoall(grad_output.contiguous(), ctx.received,
                               process_set=ctx.process_set)
        return grad, None, None, None


def _reducescatter_grad_scaled(grad_output, op, prescale_factor, postscale_factor,
                                process_set):
    """A reducescatter's output gradient scaled as Horovod scales it before
    allgathering it: times the set's size for Sum (not divided for Average),
    then times each scale factor, one multiplication at a time."""
    grad = grad_output.contiguous()
    if op == Sum:
        grad = grad * _set_size(process_set)
    if float(prescale_factor) != 1.0:
        grad = grad * float(prescale_factor)
    if float(postscale_factor) != 1.0:
        grad = grad * float(postscale_factor)
    return grad


class HorovodReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return ops.reducescatter(tensor, name, Compression.none, op, process_set,
                                 prescale_factor, postscale_factor)

    @staticmethod
    def backward(ctx, grad_output):
        grad = _reducescatter_grad_scaled(grad_output, *ctx.args)
        return ops.allgather(grad, process_set=ctx.args[-1]), None, None, None, None, None


class HorovodGroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return tuple(ops.grouped_reducescatter(list(tensors), name, Compression.none, op,
                                               process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = [_reducescatter_grad_scaled(g, *ctx.args) for g in grad_outputs]
        return (None,) * 5 + tuple(ops.grouped_allgather(grads, process_set=ctx.args[-1]))


# ---------------------------------------------------------------------------
# the collectives, with Horovod's signatures
# ---------------------------------------------------------------------------

def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """op (Average by default) over every rank's tensor, as a new tensor;
    differentiable. See horovodd.ops.allreduce."""
    if not _is_torch(tensor):
        return ops.allreduce(tensor, average, name, compression, op, prescale_factor,
                             postscale_factor, process_set)
    ops._reduce_op(average, op)  # argument errors before anything is sent
    compressed, context = compression.compress(tensor)
    reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor,
                                     postscale_factor, process_set)
    return compression.decompress(reduced, context)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """allreduce of every tensor in `tensors`, fused; a list; differentiable."""
    tensors = list(tensors)
    if not tensors or not all(_is_torch(t) for t in tensors):
        return ops.grouped_allreduce(tensors, average, name, compression, op,
                                     prescale_factor, postscale_factor, process_set)
    ops._reduce_op(average, op)
    compressed = [compression.compress(t) for t in tensors]
    reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor,
                                            postscale_factor, process_set,
                                            *[c for c, _ in compressed])
    return [compression.decompress(r, context) for r, (_, context) in zip(reduced, compressed)]


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along the first dimension;
    differentiable."""
    if not _is_torch(tensor):
        return ops.allgather(tensor, name, process_set)
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of every tensor in `tensors`; a list; differentiable."""
    tensors = list(tensors)
    if not tensors or not all(_is_torch(t) for t in tensors):
        return ops.grouped_allgather(tensors, name, process_set)
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor, as a new tensor; differentiable."""
    if not _is_torch(tensor):
        return ops.broadcast(tensor, root_rank, name, process_set)
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[i] first-dimension rows to rank i. Returns, as Horovod
    0.28 does, the rows received from rank 0 up, and when `splits` was given
    also how many rows came from each rank: (rows, received splits).
    Differentiable in the rows. (alltoall_async's handle always gives the
    pair.)"""
    if not _is_torch(tensor):
        output, received = ops.alltoall(tensor, splits, name, process_set)
    else:
        output, received = HorovodAlltoall.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """op over every rank's tensor; this rank's share of the first dimension;
    differentiable."""
    ops.check_reducescatter_op(op)
    if not _is_torch(tensor):
        return ops.reducescatter(tensor, name, compression, op, process_set, prescale_factor,
                                 postscale_factor)
    compressed, context = compression.compress(tensor)
    reduced = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                         postscale_factor)
    return compression.decompress(reduced, context)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of every tensor in `tensors`; a list; differentiable."""
    ops.check_reducescatter_op(op)
    tensors = list(tensors)
    if not tensors or not all(_is_torch(t) for t in tensors):
        return ops.grouped_reducescatter(tensors, name, compression, op, process_set,
                                         prescale_factor, postscale_factor)
    compressed = [compression.compress(t) for t in tensors]
    reduced = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                                postscale_factor, *[c for c, _ in compressed])
    return [compression.decompress(r, context) for r, (_, context) in zip(reduced, compressed)]


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Queues the reduction of a sparse COO tensor (an embedding's gradient)
    as Horovod does: allgathers of its indices and values, sent as they are
    (not coalesced first). Returns what Horovod returns, a function: calling
    it waits and returns the sparse sum (divided by the set's size for
    Average), uncoalesced, of the tensor's dtype, shape and device. The
    function is also a handle hvd.poll() and hvd.synchronize() take."""
    if not (_is_torch(tensor) and tensor.is_sparse):
        raise ValueError("sparse_allreduce_async takes a sparse torch tensor, got "
                         f"{type(tensor).__name__}")
    if op not in (Average, Sum):
        raise ValueError(f"sparse_allreduce_async supports op=Average or Sum, got {op}")
    base = ops._request_name(name, "sparse_allreduce")
    # allgather concatenates along the first dimension: send indices as
    # (nnz, sparse_dim) rows.
    indices = ops.allgather_async(tensor._indices().t().contiguous(), f"{base}.indices",
                                  process_set)
    values = ops.allgather_async(tensor._values().contiguous(), f"{base}.values", process_set)

    def finish(results):
        gathered_indices, gathered_values = results
        if op == Average:
            gathered_values = gathered_values / _set_size(process_set)
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, tensor.shape,
                                       dtype=tensor.dtype, device=tensor.device)
    return ops._combine([indices, values], finish, kind=ops._CallableHandle)
