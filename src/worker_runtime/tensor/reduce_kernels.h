// Element-wise kernels the collectives run on raw buffers of one dtype.
// float16 and bfloat16 go through float32 (each step widens both sides,
// combines them and rounds once); integer sums and products wrap around (two's
// complement) instead of overflowing. Scaling is Horovod's, bit for bit: the
// factor cast to the element type and multiplied there (float32 for float16
// and bfloat16; float64 for integers, truncated toward zero and saturating at
// the type's limits).
#pragma once

#include <cstddef>

#include "horovodd/tensor.h"

namespace horovodd::internal {

// accumulator[i] = op(accumulator[i], incoming[i]); kAverage accumulates a sum.
void ReduceInto(DType dtype, ReduceOp op, void* accumulator, const void* incoming, size_t count);

// data[i] *= factor.
void ScaleInPlace(DType dtype, void* data, size_t count, double factor);

// Turns a finished reduction over a set of `ranks` into the result, as
// Horovod does: multiplied by `postscale`, or for kAverage (a sum so far) by
// postscale / ranks, with ScaleInPlace's rules (skipped when it is 1).
void FinishReduction(DType dtype, ReduceOp op, void* data, size_t count, int ranks,
                     double postscale);

}  // namespace horovodd::internal
