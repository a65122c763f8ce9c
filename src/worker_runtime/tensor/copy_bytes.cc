#include "worker_runtime/tensor/copy_bytes.h"

#include <cstdint>
#include <cstring>

namespace horovodd::internal {
namespace {

// Below glibc's default rep_movsb_threshold (2112 bytes with AVX2).
constexpr size_t kBlock = 2048;

}  // namespace

void CopyBytes(void* to, const void* from, size_t bytes) {
  auto* out = static_cast<uint8_t*>(to);
  const auto* in = static_cast<const uint8_t*>(from);
  while (bytes > kBlock) {
    std::memcpy(out, in, kBlock);
    out += kBlock;
    in += kBlock;
    bytes -= kBlock;
  }
  if (bytes > 0) std::memcpy(out, in, bytes);
}

}  // namespace horovodd::internal
