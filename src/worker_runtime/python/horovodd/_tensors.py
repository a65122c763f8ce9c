"""What the collectives need to know about torch tensors and numpy arrays.

Contiguous CPU tensors reach the runtime without a copy: TensorRef carries
their data pointer, dtype and shape, and in-place collectives write straight
into them. Non-contiguous ones go through a contiguous copy that is written
back. Results the runtime allocates arrive as numpy arrays and are wrapped
(torch.from_numpy), again without a copy.

torch is never imported here: a tensor can only be a torch.Tensor if the
caller already imported torch.
"""

import sys

import numpy as np

from horovodd._horovodd import TensorRef


def _torch():
    return sys.modules.get("torch")


def is_torch(tensor):
    torch = _torch()
    return torch is not None and isinstance(tensor, torch.Tensor)


def check(tensor, what):
    """Raises TypeError unless `tensor` is a torch.Tensor or numpy.ndarray."""
    if isinstance(tensor, np.ndarray) or is_torch(tensor):
        return
    raise TypeError(f"{what} takes a torch.Tensor or a numpy.ndarray, "
                    f"got {type(tensor).__name__}")


def _contiguous(tensor):
    if is_torch(tensor):
        return tensor.detach().contiguous()
    return tensor if tensor.flags.c_contiguous else np.ascontiguousarray(tensor)


def writable_contiguous(tensor):
    """`tensor` itself when its memory is contiguous, else a contiguous copy
    (whose changes the caller writes back)."""
    if is_torch(tensor):
        return tensor if tensor.is_contiguous() else tensor.contiguous()
    return tensor if tensor.flags.c_contiguous else np.ascontiguousarray(tensor)


def ref(tensor):
    """A TensorRef to a contiguous tensor's memory (valid while it lives)."""
    if is_torch(tensor):
        dtype = str(tensor.dtype).replace("torch.", "")
        device = tensor.device
        return TensorRef(tensor.data_ptr(), dtype, list(tensor.shape), device.type,
                         device.index or 0)
    if not tensor.dtype.isnative:
        raise ValueError(f"array of dtype {tensor.dtype.str} is not in this machine's "
                         f"byte order; convert it with .astype(...) first")
    return TensorRef(tensor.__array_interface__["data"][0], tensor.dtype.name,
                     list(tensor.shape))


def in_place(tensor, run, what):
    """Calls run(TensorRef, contiguous tensor) on `tensor`'s memory, through a contiguous copy
    written back afterwards if it is not contiguous. Returns `tensor`."""
    check(tensor, what)
    if isinstance(tensor, np.ndarray) and not tensor.flags.writeable:
        raise ValueError(f"{what} writes into its argument, but the array is read-only")
    target = tensor.detach() if is_torch(tensor) else tensor
    contiguous = _contiguous(target)
    run(ref(contiguous), contiguous)
    if contiguous is not target:
        if is_torch(tensor):
            target.copy_(contiguous)
        else:
            target[...] = contiguous
    return tensor


def readable_ref(tensor, what):
    """(TensorRef, owner): a reference for a collective that only reads
    `tensor`; keep `owner` alive until the call returns."""
    check(tensor, what)
    contiguous = _contiguous(tensor)
    return ref(contiguous), contiguous


def clone(tensor):
    """A contiguous copy, detached from autograd."""
    if is_torch(tensor):
        torch = _torch()
        return tensor.detach().clone(memory_format=torch.contiguous_format)
    return np.array(tensor, order="C", copy=True)


def like(array, model):
    """`array` (numpy, from the runtime) as the kind of tensor `model` is:
    wrapped without a copy for a CPU torch tensor, moved to its device
    otherwise."""
    if not is_torch(model):
        return array
    torch = _torch()
    result = torch.from_numpy(array)
    if model.dtype == torch.bfloat16 and result.dtype == torch.int16:
        # numpy has no bfloat16: the runtime hands its bits back as int16.
        result = result.view(torch.bfloat16)
    return result if model.device.type == "cpu" else result.to(model.device)


def int64_vector(values, model):
    """A 1-D int64 tensor of `values`, of the kind `model` is."""
    return like(np.asarray(values, dtype=np.int64), model)


def flat_concat(tensors):
    """One contiguous 1-D tensor holding `tensors` (all one dtype) in order."""
    if is_torch(tensors[0]):
        return _torch().cat([t.detach().reshape(-1) for t in tensors])
    return np.concatenate([np.asarray(t).reshape(-1) for t in tensors])


def unflatten(flat, models):
    """Views of `flat` shaped like each of `models`, in order."""
    views, offset = [], 0
    for model in models:
        count = int(np.prod(model.shape, dtype=np.int64))
        views.append(flat[offset:offset + count].reshape(model.shape))
        offset += count
    return views


def copy_into(target, source):
    """target[...] = source, for either kind."""
    if is_torch(target):
        target.detach().copy_(source)
    else:
        target[...] = source


def to_list(values):
    """A list of ints from a list, tuple, numpy array or torch tensor."""
    if values is None:
        return []
    if is_torch(values):
        return [int(v) for v in values.tolist()]
    return [int(v) for v in np.asarray(values).reshape(-1)]


def dtype_key(tensor):
    """Something equal for tensors of one dtype (and framework)."""
    return (is_torch(tensor), str(tensor.dtype))


def as_float64(tensor):
    """A float64 numpy copy of `tensor`'s values."""
    if is_torch(tensor):
        return tensor.detach().to("cpu").double().numpy()
    return np.asarray(tensor, dtype=np.float64)


def assign_from_float64(target, values):
    """target[...] = values (float64 numpy), cast to target's dtype."""
    if is_torch(target):
        torch = _torch()
        target.detach().copy_(torch.from_numpy(np.ascontiguousarray(values)).to(target.dtype))
    else:
        target[...] = values.astype(target.dtype)


def is_floating(tensor):
    if is_torch(tensor):
        return tensor.is_floating_point()
    return np.issubdtype(tensor.dtype, np.floating)


def cast(tensor, dtype_name):
    """`tensor` converted to the dtype called `dtype_name` ("float16")."""
    if is_torch(tensor):
        return tensor.to(getattr(_torch(), dtype_name))
    return tensor.astype(dtype_name)


def dtype_name(tensor):
    return str(tensor.dtype).replace("torch.", "")
