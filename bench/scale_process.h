// The load generator's process plumbing: its own CPU, threads and open file
// limit, and the stand-in daemon (bench/scale_daemon.cc) as a child process
// it talks to over pipes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace horovodd::bench {

// User + system CPU of this process so far (the daemon's is its own).
double CpuSeconds();

// Room for `files` open files in this process and the daemon it starts (which
// inherits the limit): the hard limit too where we may (as root), else the
// soft limit up to the hard one.
void RaiseOpenFileLimit(uint64_t files);

// Threads of this process now (-1: unknown).
long ThreadCount();

// The stand-in daemon as a child process with its stdin/stdout piped to us.
struct DaemonProcess {
  pid_t pid = -1;
  FILE* in = nullptr;   // its stdin
  FILE* out = nullptr;  // its stdout

  // `connections`: how many the load generator opens (the daemon's open
  // file budget).
  bool Start(const std::string& binary, int workers, int slots, int addresses, int connections);
  void Send(const char* line);
  // One line without the newline; empty at EOF.
  std::string ReadLine();
  // Gives it `grace_s` to exit by itself after QUIT (a profiler wrapping it
  // needs the time to write its data), then kills it.
  void Kill(double grace_s = 0);
};

}  // namespace horovodd::bench
