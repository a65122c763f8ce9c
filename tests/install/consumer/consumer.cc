// The installed package's smoke program (tests/integration/test_install.py):
// joins the job, allreduces (rank + 1) with a sum, and commits an elastic
// state holding that sum, printing one line per rank:
//   consumer rank R/S sum X commits C pid P
// The test checks every rank and the sum S*(S+1)/2.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "horovodd/elastic.h"
#include "horovodd/horovodd.h"

int main() {
  if (absl::Status status = horovodd::Init(); !status.ok()) {
    std::fprintf(stderr, "consumer: init: %s\n", status.ToString().c_str());
    return 1;
  }
  std::vector<double> sum(1, 0.0);
  int64_t step = 0;
  horovodd::elastic::BufferState state;
  state.AddBuffer("sum", &sum);
  state.AddValue("step", &step);
  absl::Status status = horovodd::elastic::Run(state, [&](horovodd::elastic::State& s) {
    for (; step < 1; ++step) {
      sum[0] = horovodd::Rank() + 1;
      horovodd::AllreduceOptions options;
      options.op = horovodd::ReduceOp::kSum;
      options.name = "sum";
      if (absl::Status st = horovodd::Allreduce(horovodd::ViewOf(sum), options); !st.ok()) {
        return st;
      }
      if (absl::Status st = s.Commit(); !st.ok()) return st;
    }
    return absl::OkStatus();
  });
  if (!status.ok()) {
    std::fprintf(stderr, "consumer: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("consumer rank %d/%d sum %g commits %lld pid %d\n", horovodd::Rank(),
              horovodd::Size(), sum[0], static_cast<long long>(state.commits()),
              static_cast<int>(getpid()));
  std::fflush(stdout);
  horovodd::Shutdown();
  return 0;
}
