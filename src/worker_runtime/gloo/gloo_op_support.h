// Small helpers every collective in gloo_ops.cc and gloo_allreduce.cc uses.
#pragma once

#include <cstdint>
#include <string>

#include <gloo/context.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::internal {

// "allreduce", or "allreduce 'grads'": the collective in errors.
inline std::string Label(const char* op, const std::string& name) {
  return name.empty() ? std::string(op) : absl::StrCat(op, " '", name, "'");
}

inline absl::StatusOr<GlooContext*> OurContext(gloo::Context& context, const std::string& label) {
  auto* ours = dynamic_cast<GlooContext*>(&context);
  if (ours == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": the gloo context was not made by ConnectGlooContext"));
  }
  return ours;
}

inline uint8_t* Bytes(void* data) { return static_cast<uint8_t*>(data); }
inline const uint8_t* Bytes(const void* data) { return static_cast<const uint8_t*>(data); }

}  // namespace horovodd::internal
