// What the raw Gloo program and our worker share, so both measure the same
// thing: the message sizes, how many iterations each size gets, the step of
// the many-small-tensors case, and the RESULT line bench/bench.py parses.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace horovodd::bench {

// 4 KiB .. 64 MiB of float32, x4 per step. BENCH_SIZES=4194304,1048576 in the
// environment measures only those sizes (bench/run.sh passes it on), to look
// at one size without the others' effects on the allocator and caches.
inline std::vector<size_t> AllreduceSizes() {
  std::vector<size_t> bytes;
  if (const char* only = std::getenv("BENCH_SIZES"); only != nullptr && *only != '\0') {
    for (const char* p = only; *p != '\0';) {
      char* end = nullptr;
      const unsigned long long b = std::strtoull(p, &end, 10);
      if (end == p || b == 0 || b % sizeof(float) != 0) {
        std::fprintf(stderr, "BENCH_SIZES: want byte counts divisible by 4, got '%s'\n", only);
        std::exit(2);
      }
      bytes.push_back(static_cast<size_t>(b));
      p = *end == ',' ? end + 1 : end;
    }
    return bytes;
  }
  for (size_t b = 4 << 10; b <= (64u << 20); b *= 4) bytes.push_back(b);
  return bytes;
}

// QUICK=1 in the environment shortens every loop (bench/run.sh passes it on).
inline bool Quick() {
  const char* q = std::getenv("QUICK");
  return q != nullptr && std::string(q) == "1";
}

// About 256 MiB of traffic per size (64 MiB when quick), 3..300 (100) iterations;
// BENCH_ITERS=N in the environment: N each.
inline int IterationsFor(size_t bytes) {
  if (const char* fixed = std::getenv("BENCH_ITERS"); fixed != nullptr && std::atoi(fixed) > 0) {
    return std::atoi(fixed);
  }
  const size_t budget = Quick() ? (64u << 20) : (256u << 20);
  return static_cast<int>(std::clamp<size_t>(budget / bytes, 3, Quick() ? 100 : 300));
}
inline int WarmupsFor(size_t bytes) { return std::max(1, IterationsFor(bytes) / 10); }

// Many small tensors: a gradient set's shape.
constexpr int kSmallTensors = 100;
constexpr int kSmallTensorFloats = 1024;
inline int SmallSteps() { return Quick() ? 20 : 100; }

using Clock = std::chrono::steady_clock;
inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One line per measurement, on rank 0 only:
//   RESULT allreduce impl=ours n=2 bytes=4096 iters=1000 seconds_per_op=...
inline void PrintAllreduce(const char* impl, int size, size_t bytes, int iters, double per_op) {
  std::printf("RESULT allreduce impl=%s n=%d bytes=%zu iters=%d seconds_per_op=%.9f\n", impl, size,
              bytes, iters, per_op);
  std::fflush(stdout);
}
inline void PrintSmall(const char* impl, int size, int steps, double per_step) {
  std::printf("RESULT small impl=%s n=%d tensors=%d floats=%d steps=%d seconds_per_step=%.9f\n",
              impl, size, kSmallTensors, kSmallTensorFloats, steps, per_step);
  std::fflush(stdout);
}

}  // namespace horovodd::bench
