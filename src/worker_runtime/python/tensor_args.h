// Tensors across the Python boundary, without copying.
//
// In: Python describes a contiguous tensor (its data pointer, dtype name,
// shape and device), horovodd/_tensors.py does that for torch tensors and
// numpy arrays alike, and the collectives work on that memory in place. The
// caller keeps the owner alive for the call (every call is synchronous).
//
// Out: results whose size only the collective knows (allgather, alltoall,
// reducescatter) come back as numpy arrays that own the runtime's Tensor;
// torch.from_numpy wraps them without a copy.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "horovodd/tensor.h"

namespace horovodd::python {

// Binds horovodd::TensorView as _horovodd.TensorRef(data_ptr, dtype, shape,
// device="cpu", device_index=0). Construction raises ValueError for an
// unknown dtype or device name, a negative dimension, or a null pointer to a
// non-empty tensor.
void BindTensorRef(pybind11::module_& module);

// Hands `tensor`'s storage to a numpy array of the same dtype and shape.
// numpy has no bfloat16, so a bfloat16 result comes back as an int16 array
// of the same bits: torch.from_numpy(a).view(torch.bfloat16) is the tensor.
pybind11::array ToNumpy(Tensor tensor);

// The options of a reduction (allreduce, grouped allreduce, reducescatter) as
// every binding takes them from Python's keyword arguments.
AllreduceOptions ReductionOptions(ReduceOp op, double prescale_factor, double postscale_factor,
                                  std::string name, int process_set_id);

}  // namespace horovodd::python
