// The machine's own cost of many processes waking together, with nothing of
// horovodd in it: for each N, N forked processes run ROUNDS rounds of the
// same fixed work (touch every cache line of their own KIB KiB, then a
// barrier in shared memory whose last arrival wakes all the others with one
// FUTEX_WAKE), as a reset's phases have every survivor do a little and then
// wait for the rest. The work per process is the same at every N, so any
// growth of the CPU each process spends per round is the machine's (caches,
// the scheduler, wake-ups among more processes than cores), not the
// program's. bench.py's reset part prints it beside the reset curve.
//
//   bench_wake_floor ROUNDS KIB N [N ...]
//
// Prints per N: "FLOOR n=N rounds=R kib=K cpu_us_per_round=C wall_ms=W"
// (C: user + system CPU per process per round, mean over the processes;
// W: the wall time of all the rounds). Every child is reaped; a child that
// fails makes the program exit 1.
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

namespace {

volatile unsigned touched = 0;

// One cache line each: arrivals and the round number the sleepers wait on.
struct alignas(64) Barrier {
  std::atomic<uint32_t> arrived{0};
  alignas(64) std::atomic<uint32_t> round{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, nullptr, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Waits until all n processes arrived at this round; the last opens it.
void Arrive(Barrier& b, int n) {
  const uint32_t round = b.round.load(std::memory_order_acquire);
  if (b.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(n)) {
    b.arrived.store(0, std::memory_order_relaxed);
    b.round.store(round + 1, std::memory_order_release);
    FutexWakeAll(&b.round);
    return;
  }
  while (b.round.load(std::memory_order_acquire) == round) FutexWait(&b.round, round);
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Runs n processes; false if one failed. Sets the mean CPU per process per
// round and the wall time of the rounds (from when the last one was ready).
bool RunSize(int n, int rounds, size_t kib, double* cpu_us_per_round, double* wall_ms) {
  const size_t bytes = sizeof(Barrier) * 2 + sizeof(double) * n;
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return false;
  auto* ready = new (shared) Barrier();  // everyone forked and its memory touched
  auto* work = new (static_cast<char*>(shared) + sizeof(Barrier)) Barrier();
  auto* cpu = reinterpret_cast<double*>(static_cast<char*>(shared) + 2 * sizeof(Barrier));
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      std::vector<unsigned char> mine(kib * 1024, 1);
      Arrive(*ready, n + 1);
      const double before = CpuSeconds();
      unsigned sum = 0;
      for (int r = 0; r < rounds; ++r) {
        for (size_t at = 0; at < mine.size(); at += 64) sum += ++mine[at];
        Arrive(*work, n);
      }
      cpu[i] = CpuSeconds() - before;
      touched = sum;  // the touching is not optimized away
      _exit(0);
    }
    children.push_back(pid);
  }
  bool ok = static_cast<int>(children.size()) == n;
  if (!ok) {
    for (pid_t pid : children) kill(pid, SIGKILL);
  } else {
    Arrive(*ready, n + 1);
  }
  const auto start = std::chrono::steady_clock::now();
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  *wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (int i = 0; i < n; ++i) total += cpu[i];
  *cpu_us_per_round = total / n / rounds * 1e6;
  munmap(shared, bytes);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: bench_wake_floor ROUNDS KIB N [N ...]\n");
    return 2;
  }
  const int rounds = std::atoi(argv[1]);
  const long kib = std::atol(argv[2]);
  if (rounds < 1 || kib < 0) {
    std::fprintf(stderr, "bench_wake_floor: ROUNDS must be >= 1 and KIB >= 0\n");
    return 2;
  }
  for (int a = 3; a < argc; ++a) {
    const int n = std::atoi(argv[a]);
    if (n < 1) {
      std::fprintf(stderr, "bench_wake_floor: N must be >= 1, not '%s'\n", argv[a]);
      return 2;
    }
    double cpu_us = 0, wall_ms = 0;
    if (!RunSize(n, rounds, static_cast<size_t>(kib), &cpu_us, &wall_ms)) {
      std::fprintf(stderr, "bench_wake_floor: a process of %d failed\n", n);
      return 1;
    }
    std::printf("FLOOR n=%d rounds=%d kib=%ld cpu_us_per_round=%.1f wall_ms=%.1f\n", n, rounds, kib,
                cpu_us, wall_ms);
    std::fflush(stdout);
  }
  return 0;
}
