// In-process ranks for the collectives tests: each rank is a thread with its
// own GlooContext, all rendezvousing through one gloo HashStore on 127.0.0.1.
// Catch2 assertions are not thread-safe, so rank bodies return values and
// the test thread asserts on them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "horovodd/tensor.h"
#include "worker_runtime/comm/peer_wait.h"
#include "worker_runtime/gloo/gloo_context.h"

namespace horovodd::testing {

// Long enough for a loaded 2-core machine; a hang shows up as
// DEADLINE_EXCEEDED instead of a stuck test.
inline constexpr absl::Duration kCollectiveTimeout = absl::Seconds(90);

// Every dtype a reduction takes.
inline constexpr DType kAllDTypes[] = {DType::kUInt8,    DType::kInt8,    DType::kInt16,
                                       DType::kInt32,    DType::kInt64,   DType::kFloat16,
                                       DType::kBFloat16, DType::kFloat32, DType::kFloat64};
// Those and bool, which only moves (broadcast, allgather, alltoall).
inline constexpr DType kMovableDTypes[] = {
    DType::kUInt8,   DType::kInt8,     DType::kInt16,   DType::kInt32,   DType::kInt64,
    DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kBool};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kProduct};

// Runs body(rank) on one thread per rank, joins them all, and returns the
// results in rank order. An exception escaping a body is rethrown here.
template <typename Result>
std::vector<Result> OnEveryRank(int size, const std::function<Result(int rank)>& body) {
  std::vector<Result> results(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        results[rank] = body(rank);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return results;
}

// Connects `size` contexts concurrently through `store` under `prefix`,
// every pair up front.
std::vector<absl::StatusOr<std::shared_ptr<internal::GlooContext>>> ConnectGroup(
    gloo::rendezvous::Store& store, const std::string& prefix, int size,
    absl::Duration timeout = kCollectiveTimeout);

// The same, lazily (ConnectGlooContextLazily, as the runtime connects its
// rings): each context keeps a view of `store`, which must outlive them.
// `eager_pairs`: ConnectOptions's.
std::vector<absl::StatusOr<std::shared_ptr<internal::GlooContext>>> ConnectGroupLazily(
    gloo::rendezvous::Store& store, const std::string& prefix, int size,
    absl::Duration timeout = kCollectiveTimeout, bool eager_pairs = true);

// A connected group; the constructor REQUIREs that every rank connected.
class RankGroup {
 public:
  // Connected lazily, as the runtime's rings are: the collectives under
  // test connect the pairs they use. `store` must outlive the group.
  RankGroup(gloo::rendezvous::Store& store, const std::string& prefix, int size,
            absl::Duration timeout = kCollectiveTimeout, bool eager_pairs = true);
  int size() const { return static_cast<int>(contexts_.size()); }
  internal::GlooContext& context(int rank) { return *contexts_[rank]; }
  std::shared_ptr<internal::GlooContext>& shared(int rank) { return contexts_[rank]; }

 private:
  std::vector<std::shared_ptr<internal::GlooContext>> contexts_;
};

// Element access through double, for every dtype (float16 via float).
double GetElement(const void* data, DType dtype, int64_t index);
void SetElement(void* data, DType dtype, int64_t index, double value);

// A tensor whose element i is value(i).
Tensor MakeTensor(DType dtype, std::vector<int64_t> shape,
                  const std::function<double(int64_t)>& value);

// "" when tensor element i equals expected(i) for every i (within a
// relative tolerance for floating dtypes); else the first difference.
std::string FirstMismatch(const Tensor& tensor, const std::function<double(int64_t)>& expected);

// Folds `op` over values the way the collectives define it (average:
// sum / count, truncated for integer dtypes).
double Reduce(ReduceOp op, DType dtype, const std::vector<double>& values);

// This thread's kernel id, and whether that thread sits in a futex wait
// (blocked on a condition variable or mutex) right now.
pid_t CurrentThreadId();
bool ThreadIsInFutexWait(pid_t thread_id);

// The first wait `waits` shows for peer `rank`, polled every millisecond for
// up to 20 s (none if it never shows one).
std::optional<internal::PeerWait::Waiting> SeenWaitingFor(const internal::PeerWait& waits,
                                                          int rank);

}  // namespace horovodd::testing
