#include "discovery/host_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "discovery/host_parser.h"
#include "discovery/script_runner.h"

namespace horovodd::discovery {
namespace {

class ScriptHostSource : public HostSource {
 public:
  ScriptHostSource(std::string path, int default_slots, absl::Duration timeout)
      : path_(std::move(path)), default_slots_(default_slots), timeout_(timeout) {}

  absl::StatusOr<HostSet> Discover() override {
    HVDD_ASSIGN_OR_RETURN(std::string output, RunDiscoveryScript(path_, timeout_));
    absl::StatusOr<HostSet> hosts = ParseHostLines(output, default_slots_);
    if (!hosts.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "discovery script ", path_, " printed bad output: ", hosts.status().message()));
    }
    return hosts;
  }

  std::string Describe() const override { return absl::StrCat("script ", path_); }

 private:
  const std::string path_;
  const int default_slots_;
  const absl::Duration timeout_;
};

class StaticHostSource : public HostSource {
 public:
  explicit StaticHostSource(HostSet hosts) : hosts_(std::move(hosts)) {}

  absl::StatusOr<HostSet> Discover() override { return hosts_; }
  std::string Describe() const override { return "static hosts"; }

 private:
  const HostSet hosts_;
};

class HostfileHostSource : public HostSource {
 public:
  HostfileHostSource(std::string path, int default_slots)
      : path_(std::move(path)), default_slots_(default_slots) {}

  absl::StatusOr<HostSet> Discover() override { return ReadHostfile(path_, default_slots_); }
  std::string Describe() const override { return absl::StrCat("hostfile ", path_); }

 private:
  const std::string path_;
  const int default_slots_;
};

}  // namespace

std::unique_ptr<HostSource> MakeScriptHostSource(std::string path, int default_slots,
                                                 absl::Duration timeout) {
  return std::make_unique<ScriptHostSource>(std::move(path), default_slots, timeout);
}

std::unique_ptr<HostSource> MakeStaticHostSource(HostSet hosts) {
  // In the order given: the order ranks are assigned in.
  return std::make_unique<StaticHostSource>(std::move(hosts));
}

std::unique_ptr<HostSource> MakeHostfileHostSource(std::string path, int default_slots) {
  return std::make_unique<HostfileHostSource>(std::move(path), default_slots);
}

absl::StatusOr<HostSet> ReadHostfile(const std::string& path, int default_slots) {
  const auto error = [&path](absl::StatusCode code, absl::string_view what, int err) {
    return absl::Status(code, absl::StrCat("hostfile ", path, ": ", what, ": ",
                                           std::generic_category().message(err)));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const bool missing = err == ENOENT || err == ENOTDIR;
    return error(missing ? absl::StatusCode::kNotFound : absl::StatusCode::kPermissionDenied,
                 "cannot open", err);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("hostfile ", path, ": not a regular file"));
  }
  std::string contents;
  char buffer[64 * 1024];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return error(absl::StatusCode::kInternal, "cannot read", err);
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  absl::StatusOr<HostSet> hosts = ParseHostfile(contents, default_slots);
  if (!hosts.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hostfile ", path, ": ", hosts.status().message()));
  }
  return hosts;
}

}  // namespace horovodd::discovery
