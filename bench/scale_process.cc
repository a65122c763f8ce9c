#include "scale_process.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace horovodd::bench {

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec * 1e-6;
}

void RaiseOpenFileLimit(uint64_t files) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= files) return;
  rlimit raised{files, std::max<rlim_t>(files, limit.rlim_max)};
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return;
  raised = {limit.rlim_max, limit.rlim_max};
  setrlimit(RLIMIT_NOFILE, &raised);
}

long ThreadCount() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  long threads = -1;
  while (std::fgets(line, sizeof(line), status) != nullptr) {
    if (std::sscanf(line, "Threads: %ld", &threads) == 1) break;
  }
  std::fclose(status);
  return threads;
}

bool DaemonProcess::Start(const std::string& binary, int workers, int slots, int addresses,
                          int connections) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return false;
  pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    const std::string w = std::to_string(workers), s = std::to_string(slots),
                      a = std::to_string(addresses), c = std::to_string(connections);
    execl(binary.c_str(), binary.c_str(), w.c_str(), s.c_str(), a.c_str(), c.c_str(),
          static_cast<char*>(nullptr));
    std::perror(binary.c_str());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  in = fdopen(to_child[1], "w");
  out = fdopen(from_child[0], "r");
  return in != nullptr && out != nullptr;
}

void DaemonProcess::Send(const char* line) {
  std::fprintf(in, "%s\n", line);
  std::fflush(in);
}

std::string DaemonProcess::ReadLine() {
  char buf[512];
  if (std::fgets(buf, sizeof(buf), out) == nullptr) return "";
  std::string line(buf);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

void DaemonProcess::Kill(double grace_s) {
  for (int i = 0; pid > 0 && i < grace_s * 100; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      return;
    }
    usleep(10000);
  }
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
}

}  // namespace horovodd::bench
