// Runs a function in a forked child with its stderr captured, for tests of
// what code prints there or of a failure that aborts the process.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>

#include <catch2/catch.hpp>

namespace hvdd_test {

// Runs `body` in a child process, which then exits 0; returns the signal that
// ended it (0 when none did) and what it wrote to stderr.
inline std::pair<int, std::string> RunInChild(void (*body)()) {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    body();
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string err;
  char buffer[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) err.append(buffer, n);
  close(pipe_fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return {WIFSIGNALED(status) ? WTERMSIG(status) : 0, err};
}

}  // namespace hvdd_test
