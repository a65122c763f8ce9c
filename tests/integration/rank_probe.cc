// A worker for the SSH tests (test_ssh.py): joins the job, prints where it
// landed, passes one barrier over the job's rings, leaves. With --hold it then
// stays in the job until it is stopped, printing a line each second.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "horovodd/horovodd.h"

int main(int argc, char** argv) {
  const bool hold = argc > 1 && std::strcmp(argv[1], "--hold") == 0;
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
  while (hold) {
    std::printf("probe holding pid %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  horovodd::Shutdown();
  return 0;
}
