// The remote commands of the SSH launcher, run here through /bin/sh exactly
// as a remote login shell would run them: hostile argv, environment values
// and directories must arrive byte for byte.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/launch/ssh/remote_command.h"

namespace horovodd::daemon {
namespace {

const std::vector<std::string> kHostile = {
    "plain",
    "two words",
    "it's",
    "'",
    "''",
    "\"double\"",
    "$HOME",
    "${PATH}",
    "$(touch pwned)",
    "`touch pwned`",
    "a;touch pwned",
    "a && touch pwned",
    "a|cat",
    "new\nline",
    "trailing\\",
    "back\\slash",
    "*",
    "~",
    "#comment",
    "-n",
    "--",
    "tab\there",
    "",
    "!bang",
    "'\\''",
};

struct ShellResult {
  int status = -1;
  std::string output;
  std::string errors;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `command` with /bin/sh -c in `dir`, `input` as its stdin, stdout and
// stderr into files.
ShellResult RunShell(const std::string& command, const std::string& dir,
                     const std::string& input = "") {
  const std::string in_path = dir + "/in";
  const std::string out_path = dir + "/out";
  const std::string err_path = dir + "/err";
  {
    std::ofstream in(in_path);
    in << input;
  }
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (freopen(in_path.c_str(), "r", stdin) == nullptr ||
        freopen(out_path.c_str(), "w", stdout) == nullptr ||
        freopen(err_path.c_str(), "w", stderr) == nullptr || chdir(dir.c_str()) != 0) {
      _exit(120);
    }
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(121);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  ShellResult result;
  result.status = status;
  result.output = ReadFile(out_path);
  result.errors = ReadFile(err_path);
  return result;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/hvdd_ssh_quote_XXXXXX";
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() { std::system(absl::StrCat("rm -rf '", path_, "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Running (a zombie counts as gone: nobody may reap it in a container).
bool Alive(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(") ");
  return paren != std::string::npos && text[paren + 2] != 'Z';
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The NUL-separated fields printf '%s\0' wrote.
std::vector<std::string> Fields(const std::string& text) {
  std::vector<std::string> fields = absl::StrSplit(text, '\0');
  if (!fields.empty() && fields.back().empty()) fields.pop_back();
  return fields;
}

TEST_CASE("ShellQuote: one shell word, whatever the text", "[ssh]") {
  CHECK(ShellQuote("abc") == "'abc'");
  CHECK(ShellQuote("") == "''");
  CHECK(ShellQuote("it's") == "'it'\\''s'");
  TempDir dir;
  for (const std::string& text : kHostile) {
    INFO("text: " << text);
    ShellResult result = RunShell(absl::StrCat("printf '%s\\0' ", ShellQuote(text)), dir.path());
    REQUIRE(WIFEXITED(result.status));
    CHECK(WEXITSTATUS(result.status) == 0);
    CHECK(Fields(result.output) == std::vector<std::string>{text});
  }
  CHECK_FALSE(Exists(dir.path() + "/pwned"));
}

TEST_CASE("RemoteLaunchCommand: pid first, then argv, env and cwd exactly", "[ssh]") {
  TempDir dir;
  const std::string work = dir.path() + "/dir with 'quotes' $and `ticks`;\nnewline";
  REQUIRE(mkdir(work.c_str(), 0755) == 0);
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo cwd=\"$(pwd)\"; printf '%s\\0' \"$@\"; printf 'ENV\\0'; "
               "env -0 | sort -z",
               "argv0"};
  for (const std::string& text : kHostile) spec.argv.push_back(text);
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"WEIRD", "a'b\"c$d`e;f\ng h"}, {"EMPTY", ""}};
  spec.working_dir = work;
  absl::StatusOr<std::string> command = RemoteLaunchCommand(spec);
  REQUIRE(command.ok());

  ShellResult result = RunShell(*command, dir.path());
  REQUIRE(WIFEXITED(result.status));
  CHECK(WEXITSTATUS(result.status) == 0);
  const std::string& out = result.output;
  // First line: the marker with the shell's pid.
  const size_t first_newline = out.find('\n');
  REQUIRE(first_newline != std::string::npos);
  const std::optional<int> pid = ParseRemotePidLine(std::string_view(out).substr(0, first_newline));
  REQUIRE(pid.has_value());
  CHECK(*pid > 1);
  // Then the working directory (its name has a newline in it).
  std::string rest = out.substr(first_newline + 1);
  const std::string cwd_line = absl::StrCat("cwd=", work, "\n");
  REQUIRE(rest.substr(0, cwd_line.size()) == cwd_line);
  rest = rest.substr(cwd_line.size());
  // Then every argument, byte for byte, then exactly the environment given.
  std::vector<std::string> fields = Fields(rest);
  auto env_start = std::find(fields.begin(), fields.end(), "ENV");
  REQUIRE(env_start != fields.end());
  std::vector<std::string> args(fields.begin(), env_start);
  CHECK(args == kHostile);
  std::vector<std::string> env(env_start + 1, fields.end());
  // sh adds PWD (and may add SHLVL / _) of its own.
  env.erase(std::remove_if(env.begin(), env.end(),
                           [](const std::string& e) {
                             return e.rfind("PWD=", 0) == 0 || e.rfind("SHLVL=", 0) == 0 ||
                                    e.rfind("_=", 0) == 0 || e.rfind("OLDPWD=", 0) == 0;
                           }),
            env.end());
  CHECK(env == std::vector<std::string>{"EMPTY=", "PATH=/usr/bin:/bin", "WEIRD=a'b\"c$d`e;f\ng h"});
  CHECK_FALSE(Exists(dir.path() + "/pwned"));
  CHECK_FALSE(Exists(work + "/pwned"));
}

TEST_CASE("RemoteLaunchCommand: the pid reported is the process's own", "[ssh]") {
  TempDir dir;
  LaunchSpec spec;
  spec.argv = {"sh", "-c", "echo self=$$"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  absl::StatusOr<std::string> command = RemoteLaunchCommand(spec);
  REQUIRE(command.ok());
  ShellResult result = RunShell(*command, dir.path());
  std::vector<std::string> lines = absl::StrSplit(result.output, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 2);
  const std::optional<int> pid = ParseRemotePidLine(lines[0]);
  REQUIRE(pid.has_value());
  CHECK(lines[1] == absl::StrCat("self=", *pid));
}

TEST_CASE("RemoteLaunchCommand: a directory that does not exist stops it before the pid", "[ssh]") {
  TempDir dir;
  LaunchSpec spec;
  spec.argv = {"touch", "ran"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.working_dir = dir.path() + "/missing";
  absl::StatusOr<std::string> command = RemoteLaunchCommand(spec);
  REQUIRE(command.ok());
  ShellResult result = RunShell(*command, dir.path());
  REQUIRE(WIFEXITED(result.status));
  CHECK(WEXITSTATUS(result.status) != 0);
  CHECK(result.output.find(kRemotePidMarker) == std::string::npos);
  CHECK_THAT(result.errors, Catch::Contains("missing"));
  CHECK_FALSE(Exists(dir.path() + "/ran"));
}

TEST_CASE("RemoteLaunchCommand: what cannot be sent is refused, naming it", "[ssh]") {
  LaunchSpec spec;
  CHECK(RemoteLaunchCommand(spec).status().code() == absl::StatusCode::kInvalidArgument);
  spec.argv = {"A=B"};
  absl::Status status = RemoteLaunchCommand(spec).status();
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("'A=B'"));
  spec.argv = {"ok", std::string("nul\0byte", 8)};
  CHECK(RemoteLaunchCommand(spec).status().code() == absl::StatusCode::kInvalidArgument);
  spec.argv = {"ok"};
  spec.env = {{"BAD=NAME", "x"}};
  status = RemoteLaunchCommand(spec).status();
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("'BAD=NAME'"));
  spec.env = {{"HUGE", std::string(200 * 1024, 'x')}};
  status = RemoteLaunchCommand(spec).status();
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("bytes"));
}

TEST_CASE("RemoteKillCommand signals the whole process group", "[ssh]") {
  TempDir dir;
  // A group leader with a child in its group; both must die.
  const std::string pids = dir.path() + "/pids";
  pid_t leader = fork();
  REQUIRE(leader >= 0);
  if (leader == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c",
          absl::StrCat("sleep 300 & echo $$ $! > '", pids, ".tmp' && mv '", pids, ".tmp' '", pids,
                       "'; wait")
              .c_str(),
          static_cast<char*>(nullptr));
    _exit(121);
  }
  std::string text;
  for (int i = 0; i < 6000 && text.empty(); ++i) {
    std::ifstream in(pids);
    std::getline(in, text);
    if (text.empty()) usleep(10'000);
  }
  REQUIRE_FALSE(text.empty());
  std::vector<std::string> both = absl::StrSplit(text, ' ');
  REQUIRE(both.size() == 2);
  const int child = std::stoi(both[1]);
  ShellResult result = RunShell(RemoteKillCommand(leader, SIGKILL), dir.path());
  CHECK(WIFEXITED(result.status));
  CHECK(WEXITSTATUS(result.status) == 0);
  int status = 0;
  REQUIRE(waitpid(leader, &status, 0) == leader);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  // The child was in the group: it is gone too (it was reparented, so poll).
  bool gone = false;
  for (int i = 0; i < 6000 && !gone; ++i) {
    gone = !Alive(child);
    if (!gone) usleep(10'000);
  }
  if (!gone) kill(child, SIGKILL);
  CHECK(gone);
}

TEST_CASE("ParseRemotePidLine and SignalFromSshName", "[ssh]") {
  CHECK(ParseRemotePidLine("horovodd-remote-pid 1234") == 1234);
  CHECK_FALSE(ParseRemotePidLine("horovodd-remote-pid").has_value());
  CHECK_FALSE(ParseRemotePidLine("horovodd-remote-pid ").has_value());
  CHECK_FALSE(ParseRemotePidLine("horovodd-remote-pid 12x").has_value());
  CHECK_FALSE(ParseRemotePidLine("horovodd-remote-pid -5").has_value());
  CHECK_FALSE(ParseRemotePidLine("xhorovodd-remote-pid 5").has_value());
  CHECK(SignalFromSshName("KILL") == SIGKILL);
  CHECK(SignalFromSshName("TERM") == SIGTERM);
  CHECK(SignalFromSshName("SEGV") == SIGSEGV);
  CHECK(SignalFromSshName("NOPE") == 0);
}

TEST_CASE("RemoteLaunchCommand: the worker token travels on stdin, never on a command line",
          "[ssh]") {
  TempDir dir;
  LaunchSpec spec;
  const std::string token = "0123456789abcdef0123456789abcdef";
  spec.argv = {"sh", "-c", "echo self=$$ token=$HOROVODD_WORKER_TOKEN other=$OTHER"};
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"HOROVODD_WORKER_TOKEN", token}, {"OTHER", "x"}};
  absl::StatusOr<std::string> command = RemoteLaunchCommand(spec);
  REQUIRE(command.ok());
  CHECK(command->find(token) == std::string::npos);
  CHECK(RemoteLaunchStdin(spec) == token + "\n");

  ShellResult result = RunShell(*command, dir.path(), RemoteLaunchStdin(spec));
  std::vector<std::string> lines = absl::StrSplit(result.output, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() == 2);
  // Still the process's own pid, with the token and the rest of the environment.
  const std::optional<int> pid = ParseRemotePidLine(lines[0]);
  REQUIRE(pid.has_value());
  CHECK(lines[1] == absl::StrCat("self=", *pid, " token=", token, " other=x"));

  // No secret: nothing on stdin, and the command is the plain one.
  spec.env.erase("HOROVODD_WORKER_TOKEN");
  CHECK(RemoteLaunchStdin(spec).empty());
  CHECK(RemoteLaunchCommand(spec)->find("read -r") == std::string::npos);
}

}  // namespace
}  // namespace horovodd::daemon
