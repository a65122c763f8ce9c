#include "test_collectives_harness.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/prefix_store.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/tensor/float16.h"

namespace horovodd::testing {

std::vector<absl::StatusOr<std::shared_ptr<internal::GlooContext>>> ConnectGroup(
    gloo::rendezvous::Store& store, const std::string& prefix, int size, absl::Duration timeout) {
  return OnEveryRank<absl::StatusOr<std::shared_ptr<internal::GlooContext>>>(size, [&](int rank) {
    gloo::rendezvous::PrefixStore scoped(prefix, store);
    internal::ConnectOptions options;
    options.rank = rank;
    options.size = size;
    options.timeout = timeout;
    return internal::ConnectGlooContext(scoped, options);
  });
}

std::vector<absl::StatusOr<std::shared_ptr<internal::GlooContext>>> ConnectGroupLazily(
    gloo::rendezvous::Store& store, const std::string& prefix, int size, absl::Duration timeout,
    bool eager_pairs) {
  return OnEveryRank<absl::StatusOr<std::shared_ptr<internal::GlooContext>>>(size, [&](int rank) {
    internal::ConnectOptions options;
    options.rank = rank;
    options.size = size;
    options.timeout = timeout;
    options.eager_pairs = eager_pairs;
    return internal::ConnectGlooContextLazily(
        std::make_shared<gloo::rendezvous::PrefixStore>(prefix, store), options);
  });
}

RankGroup::RankGroup(gloo::rendezvous::Store& store, const std::string& prefix, int size,
                     absl::Duration timeout, bool eager_pairs) {
  for (auto& context : ConnectGroupLazily(store, prefix, size, timeout, eager_pairs)) {
    REQUIRE(context.status().ToString() == "OK");
    contexts_.push_back(*std::move(context));
  }
}

double GetElement(const void* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kUInt8:
      return static_cast<const uint8_t*>(data)[index];
    case DType::kInt32:
      return static_cast<const int32_t*>(data)[index];
    case DType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(data)[index]);
    case DType::kFloat16:
      return internal::HalfToFloat(static_cast<const uint16_t*>(data)[index]);
    case DType::kFloat32:
      return static_cast<const float*>(data)[index];
    case DType::kFloat64:
      return static_cast<const double*>(data)[index];
    case DType::kInt8:
      return static_cast<const int8_t*>(data)[index];
    case DType::kInt16:
      return static_cast<const int16_t*>(data)[index];
    case DType::kBool:
      return static_cast<const uint8_t*>(data)[index] != 0 ? 1 : 0;
    case DType::kBFloat16:
      return internal::BFloat16ToFloat(static_cast<const uint16_t*>(data)[index]);
  }
  return 0;
}

void SetElement(void* data, DType dtype, int64_t index, double value) {
  switch (dtype) {
    case DType::kUInt8:
      static_cast<uint8_t*>(data)[index] = static_cast<uint8_t>(value);
      return;
    case DType::kInt32:
      static_cast<int32_t*>(data)[index] = static_cast<int32_t>(value);
      return;
    case DType::kInt64:
      static_cast<int64_t*>(data)[index] = static_cast<int64_t>(value);
      return;
    case DType::kFloat16:
      static_cast<uint16_t*>(data)[index] = internal::FloatToHalf(static_cast<float>(value));
      return;
    case DType::kFloat32:
      static_cast<float*>(data)[index] = static_cast<float>(value);
      return;
    case DType::kFloat64:
      static_cast<double*>(data)[index] = value;
      return;
    case DType::kInt8:
      static_cast<int8_t*>(data)[index] = static_cast<int8_t>(static_cast<int64_t>(value));
      return;
    case DType::kInt16:
      static_cast<int16_t*>(data)[index] = static_cast<int16_t>(static_cast<int64_t>(value));
      return;
    case DType::kBool:
      static_cast<uint8_t*>(data)[index] = value != 0 ? 1 : 0;
      return;
    case DType::kBFloat16:
      static_cast<uint16_t*>(data)[index] = internal::FloatToBFloat16(static_cast<float>(value));
      return;
  }
}

Tensor MakeTensor(DType dtype, std::vector<int64_t> shape,
                  const std::function<double(int64_t)>& value) {
  Tensor tensor(dtype, std::move(shape));
  for (int64_t i = 0; i < tensor.numel(); ++i) SetElement(tensor.data(), dtype, i, value(i));
  return tensor;
}

std::string FirstMismatch(const Tensor& tensor, const std::function<double(int64_t)>& expected) {
  const DType dtype = tensor.dtype();
  const bool floating = dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
                        dtype == DType::kFloat32 || dtype == DType::kFloat64;
  // bfloat16 keeps 8 significant bits, float16 11.
  const double tolerance = dtype == DType::kBFloat16  ? 1e-2
                           : dtype == DType::kFloat16 ? 1e-2
                                                      : 1e-5;
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    const double got = GetElement(tensor.data(), tensor.dtype(), i);
    // What the expected value is once stored in the dtype: bool keeps
    // whether it is non-zero, int8 wraps, bfloat16 rounds.
    uint64_t stored = 0;
    SetElement(&stored, dtype, 0, expected(i));
    const double want = GetElement(&stored, dtype, 0);
    const bool same =
        floating ? std::abs(got - want) <= tolerance * std::max(1.0, std::abs(want)) : got == want;
    if (!same) {
      return absl::StrCat(DTypeName(tensor.dtype()), " element ", i, " of ", tensor.numel(),
                          ": got ", got, ", want ", want);
    }
  }
  return "";
}

double Reduce(ReduceOp op, DType dtype, const std::vector<double>& values) {
  double result = values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        result += values[i];
        break;
      case ReduceOp::kMin:
        result = std::min(result, values[i]);
        break;
      case ReduceOp::kMax:
        result = std::max(result, values[i]);
        break;
      case ReduceOp::kProduct:
        result *= values[i];
        break;
    }
  }
  if (op != ReduceOp::kAverage) return result;
  const double average = result / static_cast<double>(values.size());
  const bool integral = dtype == DType::kUInt8 || dtype == DType::kInt8 || dtype == DType::kInt16 ||
                        dtype == DType::kInt32 || dtype == DType::kInt64;
  return integral ? std::trunc(average) : average;
}

pid_t CurrentThreadId() { return static_cast<pid_t>(syscall(SYS_gettid)); }

bool ThreadIsInFutexWait(pid_t thread_id) {
  // First field of /proc/<pid>/task/<tid>/syscall: the syscall the thread
  // is blocked in ("running" when it is not in one).
  std::ifstream file(absl::StrCat("/proc/self/task/", thread_id, "/syscall"));
  std::string number;
  return static_cast<bool>(file >> number) && number == std::to_string(SYS_futex);
}

std::optional<internal::PeerWait::Waiting> SeenWaitingFor(const internal::PeerWait& waits,
                                                          int rank) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    std::optional<internal::PeerWait::Waiting> w = waits.Current();
    if (w.has_value() && w->rank == rank) return w;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return std::nullopt;
}

}  // namespace horovodd::testing
