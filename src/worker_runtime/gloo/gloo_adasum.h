// Adasum (Maleki et al., "Adasum: Adaptive Summation of Gradients for Deep
// Learning Optimization", 2020) over a ring's pairwise transfers: Horovod's
// recursive vector-halving, distance-doubling algorithm, so each rank moves
// about twice the tensor instead of gathering every rank's copy.
//
// Two vectors combine as
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// (a zero vector leaves the other), and the ranks combine in pairs: rank 2i
// with 2i+1, then the results of ranks 4i..4i+1 with 4i+2..4i+3, and so on.
// At the level of distance d, rank r and r^d each keep one half of the
// segment they hold and send the other half to each other; the dot products
// of the halves are summed over the 2d ranks whose halves make up the two
// vectors being combined; each rank combines its half. After log2(size)
// levels every rank holds 1/size of the result, and the halvings, undone in
// reverse, share it. The arithmetic is float64 throughout.
#pragma once

#include "absl/status/status.h"
#include "horovodd/tensor.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::internal {

// In place: every rank ends with the Adasum of all ranks' `inout`, each
// multiplied by prescale_factor first, the result by postscale_factor.
// float16, bfloat16, float32 and float64 only; the ring's size must be a
// power of two (INVALID_ARGUMENT otherwise, as for any other dtype).
absl::Status Adasum(GlooContext& context, TensorView inout, double prescale_factor = 1.0,
                    double postscale_factor = 1.0);

// Whether Adasum runs on `size` ranks here (a power of two).
bool AdasumSupportsSize(int size);

}  // namespace horovodd::internal
