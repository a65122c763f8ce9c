// Our side of the benchmarks: a worker that links the runtime and is started
// by horovodrun (one process per rank, the daemon embedded in horovodrun), as
// a user's training program is.
//
//   bench_hvdd_worker allreduce      the sizes of bench_common.h, float32 sum
//   bench_hvdd_worker small          100 x 1024 floats per step: async + fused,
//                                    and one synchronous call per tensor
//   bench_hvdd_worker elastic DIR    allreduce in a loop inside elastic::Run;
//                                    each completed step is logged with its
//                                    CLOCK_REALTIME time to DIR/w-<pid>.log;
//                                    every rank returns once DIR/stop exists;
//                                    each line also carries what connecting
//                                    rings has cost this process so far
//                                    (pairs connected, keys and key bytes read)
//
// Rank 0 prints the RESULT lines (bench_common.h) of the first two modes.
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench_common.h"
#include "horovodd/async.h"
#include "horovodd/elastic.h"
#include "horovodd/horovodd.h"
// Not public: the ring's connect counters, which the reset benchmark reports.
#include "worker_runtime/gloo/gloo_context.h"
// Not public either: when the last rejoin passed each phase.
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::bench {
namespace {

AllreduceOptions Sum() {
  AllreduceOptions options;
  options.op = ReduceOp::kSum;
  return options;
}

absl::Status RunAllreduce() {
  for (size_t bytes : AllreduceSizes()) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    for (int i = 0; i < WarmupsFor(bytes); ++i) {
      if (auto st = Allreduce(ViewOf(data), Sum()); !st.ok()) return st;
    }
    if (auto st = Barrier(); !st.ok()) return st;
    const int iters = IterationsFor(bytes);
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) {
      if (auto st = Allreduce(ViewOf(data), Sum()); !st.ok()) return st;
    }
    const double per_op = Seconds(start, Clock::now()) / iters;
    if (Rank() == 0) PrintAllreduce("ours", Size(), bytes, iters, per_op);
  }
  return absl::OkStatus();
}

// One step: every tensor of the gradient set enqueued, then all waited on.
absl::Status AsyncStep(std::vector<std::vector<float>>& tensors) {
  std::vector<Handle> handles;
  handles.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto handle = AllreduceAsync(absl::StrCat("grad.", i), ViewOf(tensors[i]), Sum());
    if (!handle.ok()) return handle.status();
    handles.push_back(*handle);
  }
  for (const Handle& h : handles) {
    if (auto st = Synchronize(h); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status SyncStep(std::vector<std::vector<float>>& tensors) {
  for (auto& t : tensors) {
    if (auto st = Allreduce(ViewOf(t), Sum()); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status RunSmall() {
  std::vector<std::vector<float>> tensors(kSmallTensors,
                                          std::vector<float>(kSmallTensorFloats, 1.0f));
  const std::pair<const char*, absl::Status (*)(std::vector<std::vector<float>>&)> variants[] = {
      {"ours_async", &AsyncStep}, {"ours_sync", &SyncStep}};
  for (const auto& [impl, step] : variants) {
    for (int i = 0; i < 3; ++i) {
      if (auto st = step(tensors); !st.ok()) return st;
    }
    if (auto st = Barrier(); !st.ok()) return st;
    const int steps = SmallSteps();
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) {
      if (auto st = step(tensors); !st.ok()) return st;
    }
    const double per_step = Seconds(start, Clock::now()) / steps;
    if (Rank() == 0) PrintSmall(impl, Size(), steps, per_step);
  }
  return absl::OkStatus();
}

double RealtimeSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// This process's user + system CPU time so far, all threads.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// This process's context switches so far, all threads: voluntary (a wait
// that slept) and involuntary (preempted at the end of a time slice); and
// the calling thread's voluntary ones (the main thread: a reset's set-up and
// its waits for each collective; the engine's thread waits in the
// collectives themselves).
// Also its page faults so far (minor: a page mapped without I/O, as a
// rank's first touch of a page of a new generation's segment is).
struct Usage {
  long long voluntary;
  long long involuntary;
  long long this_thread_voluntary;
  long long minor_faults;
};
Usage UsageSoFar() {
  rusage process{};
  getrusage(RUSAGE_SELF, &process);
  rusage thread{};
  getrusage(RUSAGE_THREAD, &thread);
  return Usage{process.ru_nvcsw, process.ru_nivcsw, thread.ru_nvcsw, process.ru_minflt};
}

// The reset benchmark's worker. A step is 2 ms of "compute" (a sleep: the
// machine has 2 cores and up to 16 workers) and one allreduce of 1024 floats.
absl::Status RunElastic(const std::string& dir) {
  const std::string log_path = absl::StrCat(dir, "/w-", getpid(), ".log");
  FILE* log = std::fopen(log_path.c_str(), "w");
  if (log == nullptr) return absl::NotFoundError(absl::StrCat("cannot write ", log_path));
  const std::string stop_path = dir + "/stop";
  std::vector<float> weights(1024, 0.0f);
  int64_t step = 0;
  elastic::BufferState state;
  state.AddBuffer("weights", &weights);
  state.AddValue("step", &step);
  absl::Status result = elastic::Run(state, [&](elastic::State& s) -> absl::Status {
    // The state is synced when train starts: the last phase before the first step.
    const double synced = RealtimeSeconds();
    const internal::JoinTimes join = internal::LastJoinTimes();
    std::vector<float> grad(weights.size(), 1.0f);
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (auto st = Allreduce(ViewOf(grad)); !st.ok()) return st;
      ++step;
      // Written as soon as the allreduce completed; the reader orders by time.
      const internal::RingConnectTotals rings = internal::ProcessRingConnectTotals();
      const Usage usage = UsageSoFar();
      std::fprintf(
          log,
          "STEP t=%.6f cpu=%.6f rank=%d size=%d gen=%lld step=%lld pairs=%lld keys=%lld "
          "key_bytes=%lld csw=%lld,%lld,%lld flt=%lld join=%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n",
          RealtimeSeconds(), CpuSeconds(), Rank(), Size(), static_cast<long long>(Generation()),
          static_cast<long long>(step), static_cast<long long>(rings.pairs_connected),
          static_cast<long long>(rings.keys_read), static_cast<long long>(rings.key_bytes_read),
          usage.voluntary, usage.involuntary, usage.this_thread_voluntary, usage.minor_faults,
          join.began, join.asked, join.answered, join.ring_connected, join.communicator_ready,
          synced);
      std::fflush(log);
      if (step % 10 != 0) continue;
      // Every rank stops at the same step: the stop flag is reduced (max).
      struct stat unused;
      std::vector<float> stop(1, stat(stop_path.c_str(), &unused) == 0 ? 1.0f : 0.0f);
      AllreduceOptions max;
      max.op = ReduceOp::kMax;
      if (auto st = Allreduce(ViewOf(stop), max); !st.ok()) return st;
      if (stop[0] > 0) return absl::OkStatus();
      if (auto st = s.Commit(); !st.ok()) return st;
    }
  });
  std::fclose(log);
  return result;
}

// BENCH_SLOW_START_MS=N BENCH_SLOW_START_RANK=R: a worker the daemon planned
// at rank R or above waits N ms before it starts, as one importing a
// framework would (the scale-up benchmark's slow joiner).
void MaybeStartSlowly() {
  const char* ms = std::getenv("BENCH_SLOW_START_MS");
  const char* from = std::getenv("BENCH_SLOW_START_RANK");
  const char* planned = std::getenv("HOROVOD_RANK");
  if (ms == nullptr || from == nullptr || planned == nullptr) return;
  if (std::atoi(planned) < std::atoi(from)) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

int Main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (!(mode == "allreduce" && argc == 2) && !(mode == "small" && argc == 2) &&
      !(mode == "elastic" && argc == 3)) {
    std::fprintf(stderr, "usage: %s allreduce | small | elastic DIR\n", argv[0]);
    return 2;
  }
  MaybeStartSlowly();
  if (auto st = Init(); !st.ok()) {
    std::fprintf(stderr, "init failed: %s\n", st.ToString().c_str());
    return 1;
  }
  absl::Status st = mode == "allreduce" ? RunAllreduce()
                    : mode == "small"   ? RunSmall()
                                        : RunElastic(argv[2]);
  Shutdown();
  if (!st.ok()) {
    std::fprintf(stderr, "%s benchmark failed: %s\n", mode.c_str(), st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace horovodd::bench

int main(int argc, char** argv) { return horovodd::bench::Main(argc, argv); }
