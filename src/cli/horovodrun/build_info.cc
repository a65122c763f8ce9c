#include "cli/horovodrun/build_info.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace horovodd::cli {
namespace {

// Whether `<python> -c "import <module>"` succeeds, its output discarded.
bool PythonImports(const char* python, const char* module) {
  const std::string code = absl::StrCat("import ", module);
  const char* argv[] = {python, "-c", code.c_str(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned =
      posix_spawnp(&pid, python, &actions, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return false;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

const char* Mark(bool built) { return built ? "X" : " "; }

}  // namespace

std::string VersionText() { return HVDD_VERSION; }

std::string CheckBuildText() {
  // The interpreter the package is built for; python3 on the PATH where that one is gone
  // (the binary was moved to another machine).
  const bool torch = access(HVDD_PACKAGE_PYTHON, X_OK) == 0
                         ? PythonImports(HVDD_PACKAGE_PYTHON, "horovodd.torch")
                         : PythonImports("python3", "horovodd.torch");
  const bool nccl = HVDD_HOROVODRUN_NCCL != 0;
  return absl::StrCat("horovodd v", VersionText(), " (Horovod 0.28's API):\n", "\n",
                      "Available Frameworks:\n", "    [ ] TensorFlow\n", "    [", Mark(torch),
                      "] PyTorch\n", "    [ ] MXNet\n", "\n", "Available Controllers:\n",
                      "    [ ] MPI\n", "    [X] Gloo\n", "\n", "Available Tensor Operations:\n",
                      "    [", Mark(nccl), "] NCCL\n", "    [ ] DDL\n", "    [ ] CCL\n",
                      "    [ ] MPI\n", "    [X] Gloo\n");
}

}  // namespace horovodd::cli
