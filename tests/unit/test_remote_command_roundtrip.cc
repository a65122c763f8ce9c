// The SSH launcher's remote command on random hostile input: argv elements and
// environment values made of every byte but NUL (quotes, $(...), backticks,
// ';', newlines, invalid UTF-8...) must reach the process unchanged when the
// command runs through `sh -c` (dash here) and `bash -c`, as a remote login
// shell would run it. Complements the fixed cases of test_ssh_quote.cc.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/launch/ssh/remote_command.h"

namespace horovodd::daemon {
namespace {

// Random text of 0..40 bytes, each 1..255, leaning on the shell's special ones.
std::string HostileText(std::mt19937& random) {
  static const std::string kSpecial = "'\"\\$`;&|<>()[]{}*?!~#%^\n\t -=";
  std::uniform_int_distribution<int> length(0, 40);
  std::uniform_int_distribution<int> pick(0, 2);
  std::uniform_int_distribution<int> any_byte(1, 255);
  std::uniform_int_distribution<size_t> special(0, kSpecial.size() - 1);
  std::string text;
  for (int n = length(random); n > 0; --n) {
    text += pick(random) == 0 ? static_cast<char>(any_byte(random)) : kSpecial[special(random)];
  }
  return text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `command` with `shell` -c in `dir`; returns its stdout (exit must be 0).
std::string Run(const std::string& shell, const std::string& command, const std::string& dir) {
  const std::string out = dir + "/out";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (std::freopen(out.c_str(), "w", stdout) == nullptr || chdir(dir.c_str()) != 0) _exit(120);
    execl(shell.c_str(), shell.c_str(), "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(121);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return ReadFile(out);
}

std::vector<std::string> NulFields(const std::string& text) {
  std::vector<std::string> fields = absl::StrSplit(text, '\0');
  if (!fields.empty() && fields.back().empty()) fields.pop_back();
  return fields;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

TEST_CASE("random hostile argv and env values round-trip through sh -c and bash -c", "[ssh]") {
  char pattern[] = "/tmp/hvdd_remote_roundtrip_XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  const std::string dir = pattern;
  std::mt19937 random(20261130);  // fixed: a failure replays
  for (const std::string shell : {"/bin/sh", "/bin/bash"}) {
    if (access(shell.c_str(), X_OK) != 0) continue;
    for (int round = 0; round < 25; ++round) {
      LaunchSpec spec;
      // Prints each argument, then the value of HOSTILE, NUL-terminated.
      spec.argv = {"/bin/sh", "-c", "printf '%s\\0' \"$@\" \"$HOSTILE\"", "argv0"};
      std::vector<std::string> expected;
      for (int i = 0; i < 8; ++i) {
        expected.push_back(HostileText(random));
        spec.argv.push_back(expected.back());
      }
      const std::string value = HostileText(random);
      expected.push_back(value);
      spec.env = {{"PATH", "/usr/bin:/bin"}, {"HOSTILE", value}};
      absl::StatusOr<std::string> command = RemoteLaunchCommand(spec);
      REQUIRE(command.ok());
      INFO("shell " << shell << ", round " << round << ", command: " << *command);
      const std::string out = Run(shell, *command, dir);
      // The pid marker line first, then the fields.
      const size_t newline = out.find('\n');
      REQUIRE(newline != std::string::npos);
      CHECK(ParseRemotePidLine(out.substr(0, newline)).has_value());
      CHECK(NulFields(out.substr(newline + 1)) == expected);
    }
  }
  // Nothing the text said was run: no file appeared beside the output.
  CHECK_FALSE(Exists(dir + "/pwned"));
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
}

}  // namespace
}  // namespace horovodd::daemon
