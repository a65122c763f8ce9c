#include "worker_runtime/tensor/copy_bytes.h"

#include <cstdint>
#include <cstring>

namespace horovodd::internal {
namespace {

// Below glibc's default rep_movsb_threshold (2112 bytes with AVX2).
constexpr size_t kBlock = 2048;

// Whether to keep glibc's memcpy off `rep movsb` (see copy_bytes.h): on AMD
// CPUs only. On Intel's (fast strings) it is the fastest copy there is.
bool AvoidRepMovsb() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

}  // namespace

void CopyBytes(void* to, const void* from, size_t bytes) {
  static const bool in_blocks = AvoidRepMovsb();
  auto* out = static_cast<uint8_t*>(to);
  const auto* in = static_cast<const uint8_t*>(from);
  if (in_blocks) {
    while (bytes > kBlock) {
      std::memcpy(out, in, kBlock);
      out += kBlock;
      in += kBlock;
      bytes -= kBlock;
    }
  }
  if (bytes > 0) std::memcpy(out, in, bytes);
}

}  // namespace horovodd::internal
