// Small helpers every collective in gloo_ops.cc and gloo_allreduce.cc uses.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "horovodd/tensor.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::internal {

inline uint8_t* Bytes(void* data) { return static_cast<uint8_t*>(data); }
inline const uint8_t* Bytes(const void* data) { return static_cast<const uint8_t*>(data); }

}  // namespace horovodd::internal
