// The shared-memory transport alone, without the daemon or the engine: N
// forked processes on one segment (shm/shm_group.h), float32 sum allreduce
// in place, the sizes and iterations of bench_common.h. It tells the
// transport's share of bench_hvdd_worker's time (the rest is the engine's
// negotiation and hand-offs).
//
//   bench_shm_allreduce N [slot_bytes]
//
// Rank 0 prints RESULT allreduce impl=shm lines. Every child is reaped.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "bench_common.h"
#include "worker_runtime/shm/shm_collectives.h"
#include "worker_runtime/shm/shm_group.h"

namespace horovodd::bench {
namespace {

int RunRank(internal::shm::ShmGroup& group) {
  AllreduceOptions sum;
  sum.op = ReduceOp::kSum;
  const absl::Time deadline = absl::Now() + absl::Minutes(10);
  for (size_t bytes : AllreduceSizes()) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    TensorView view{data.data(), DType::kFloat32, {static_cast<int64_t>(data.size())}, {}};
    for (int i = 0; i < WarmupsFor(bytes); ++i) {
      if (!internal::shm::Allreduce(group, view, sum, deadline).ok()) return 1;
    }
    if (!internal::shm::Barrier(group, deadline).ok()) return 1;
    const int iters = IterationsFor(bytes);
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) {
      if (!internal::shm::Allreduce(group, view, sum, deadline).ok()) return 1;
    }
    const double per_op = Seconds(start, Clock::now()) / iters;
    if (group.rank() == 0) PrintAllreduce("shm", group.size(), bytes, iters, per_op);
  }
  return 0;
}

}  // namespace
}  // namespace horovodd::bench

int main(int argc, char** argv) {
  using horovodd::internal::shm::GroupOptions;
  using horovodd::internal::shm::ShmGroup;
  if (argc < 2 || std::atoi(argv[1]) < 2) {
    std::fprintf(stderr, "usage: bench_shm_allreduce N [slot_bytes]\n");
    return 2;
  }
  GroupOptions options;
  options.size = std::atoi(argv[1]);
  if (argc > 2) options.slot_bytes = std::strtoull(argv[2], nullptr, 10);
  options.pids.assign(options.size, 0);  // no watch: the children are ours
  auto leader = ShmGroup::Create(options);
  if (!leader.ok()) {
    std::fprintf(stderr, "%s\n", leader.status().ToString().c_str());
    return 1;
  }
  std::vector<pid_t> children;
  for (int r = 1; r < options.size; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      options.rank = r;
      auto peer = ShmGroup::Attach(options, getppid(), (*leader)->segment().fd());
      _exit(peer.ok() ? horovodd::bench::RunRank(**peer) : 1);
    }
    children.push_back(pid);
  }
  int code = horovodd::bench::RunRank(**leader);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) code = 1;
  }
  return code;
}
