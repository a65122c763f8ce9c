// A worker for the multi-host tests (test_ssh.py, test_hierarchical_link.py):
// joins the job, prints where it landed, passes one barrier over the job's
// rings, leaves.
//   --hold                 then stays in the job until it is stopped,
//                          printing a line each second
//   --allreduce BYTES N    then sums BYTES of float32 N times (rank r adds
//                          r + 1 + i at element i) and checks every element
//                          of every result, printing "probe allreduce ok"
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "horovodd/horovodd.h"

namespace {

// Exact in float32 while the sums stay below 2^24: the element index is
// taken modulo 1024, and ranks are few.
float Contribution(int rank, size_t i) { return static_cast<float>(rank + 1 + i % 1024); }

int CheckedAllreduces(size_t bytes, int iterations) {
  const size_t count = bytes / sizeof(float);
  const int size = horovodd::Size();
  std::vector<float> values(count);
  horovodd::AllreduceOptions sum;
  sum.op = horovodd::ReduceOp::kSum;  // the default is Horovod's: average
  for (int iteration = 0; iteration < iterations; ++iteration) {
    for (size_t i = 0; i < count; ++i) values[i] = Contribution(horovodd::Rank(), i);
    if (absl::Status status = horovodd::Allreduce(horovodd::ViewOf(values), sum); !status.ok()) {
      std::fprintf(stderr, "rank_probe: allreduce %d: %s\n", iteration, status.ToString().c_str());
      return 1;
    }
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int r = 0; r < size; ++r) expected += Contribution(r, i);
      if (values[i] != expected) {
        std::fprintf(stderr, "rank_probe: allreduce %d: element %zu is %g, expected %g\n",
                     iteration, i, values[i], expected);
        return 1;
      }
    }
  }
  std::printf("probe allreduce ok rank %d: %d x %zu bytes\n", horovodd::Rank(), iterations,
              count * sizeof(float));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool hold = false;
  size_t allreduce_bytes = 0;
  int iterations = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--hold") == 0) {
      hold = true;
    } else if (std::strcmp(argv[i], "--allreduce") == 0 && i + 2 < argc) {
      allreduce_bytes = std::strtoull(argv[i + 1], nullptr, 10);
      iterations = std::atoi(argv[i + 2]);
      i += 2;
    } else {
      std::fprintf(stderr, "rank_probe: unknown argument '%s' (--hold, --allreduce BYTES N)\n",
                   argv[i]);
      return 2;
    }
  }
  if (absl::Status status = horovodd::Init(); !status.ok()) {
    std::fprintf(stderr, "rank_probe: %s\n", status.ToString().c_str());
    return 1;
  }
  const char* host = std::getenv("HOROVOD_HOSTNAME");
  std::printf("probe rank %d/%d local %d/%d cross %d/%d host %s pid %d\n", horovodd::Rank(),
              horovodd::Size(), horovodd::LocalRank(), horovodd::LocalSize(), horovodd::CrossRank(),
              horovodd::CrossSize(), host ? host : "?", static_cast<int>(getpid()));
  std::fflush(stdout);
  if (absl::Status status = horovodd::Barrier(); !status.ok()) {
    std::fprintf(stderr, "rank_probe: barrier: %s\n", status.ToString().c_str());
    return 1;
  }
  if (iterations > 0) {
    if (int code = CheckedAllreduces(allreduce_bytes, iterations); code != 0) return code;
    std::fflush(stdout);
  }
  while (hold) {
    std::printf("probe holding pid %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  horovodd::Shutdown();
  return 0;
}
