#include "cli/horovodrun/remote_settings.h"

#include <net/if.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace horovodd::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxPort = 65535;
constexpr char kDefaultHostKeyChecking[] = "accept-new";

// The user horovodrun runs as: OpenSSH's default login name.
std::string CurrentUserName() {
  std::vector<char> buffer(16 * 1024);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || !found) return "";
  return found->pw_name;
}

// The absolute path of a file that must exist and be readable.
absl::StatusOr<std::string> ReadableFile(const RawSetting& setting) {
  const fs::path path = fs::absolute(setting.values.front()).lexically_normal();
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status))
    return InvalidSetting(setting, absl::StrCat(path.string(), ": no such file"));
  if (!fs::is_regular_file(status)) {
    return InvalidSetting(setting, absl::StrCat(path.string(), ": not a regular file"));
  }
  if (!std::ifstream(path)) {
    return InvalidSetting(
        setting, absl::StrCat(path.string(), ": cannot read it (", std::strerror(errno), ")"));
  }
  return path.string();
}

absl::Status ReadSsh(const RawSettings& settings, v1::SshSpec* ssh) {
  HVDD_ASSIGN_OR_RETURN(std::optional<int> port, ReadInt(settings, "ssh_port", 1));
  if (port.value_or(22) > kMaxPort) {
    return InvalidSetting(*FindSetting(settings, "ssh_port"),
                          absl::StrCat(*port, " is not a port (1-", kMaxPort, ")"));
  }
  ssh->set_port(port.value_or(22));

  ssh->set_user(CurrentUserName());
  if (const RawSetting* user = FindSetting(settings, "ssh_user")) {
    if (user->values.front().empty()) return InvalidSetting(*user, "the user name is empty");
    ssh->set_user(user->values.front());
  }
  if (const RawSetting* identity = FindSetting(settings, "ssh_identity_file")) {
    HVDD_ASSIGN_OR_RETURN(std::string path, ReadableFile(*identity));
    ssh->set_identity_file(path);
  }

  ssh->set_host_key_checking(kDefaultHostKeyChecking);
  const RawSetting* checking = FindSetting(settings, "ssh_host_key_checking");
  if (checking != nullptr) {
    const std::string mode = absl::AsciiStrToLower(checking->values.front());
    if (mode != "strict" && mode != "accept-new" && mode != "off") {
      return InvalidSetting(*checking, absl::StrCat("'", checking->values.front(),
                                                    "' is not one of strict, accept-new, off"));
    }
    ssh->set_host_key_checking(mode);
  }
  if (const RawSetting* known_hosts = FindSetting(settings, "ssh_known_hosts")) {
    if (ssh->host_key_checking() == "strict") {
      // Under strict checking a missing file refuses every host: say so now.
      absl::StatusOr<std::string> path = ReadableFile(*known_hosts);
      if (!path.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path.status().message(), " (--ssh-host-key-checking strict needs the hosts' keys)"));
      }
      ssh->set_known_hosts_file(*path);
    } else {
      ssh->set_known_hosts_file(
          fs::absolute(known_hosts->values.front()).lexically_normal().string());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadRemoteSettings(const RawSettings& settings, v1::JobSpec* spec) {
  HVDD_RETURN_IF_ERROR(ReadSsh(settings, spec->mutable_ssh()));
  if (const RawSetting* interfaces = FindSetting(settings, "network_interface")) {
    // Horovod's forms: repeated, and comma-separated; each name once, in the order given.
    std::vector<std::string> names;
    for (const std::string& value : interfaces->values) {
      for (absl::string_view piece : absl::StrSplit(value, ',')) {
        const std::string name(absl::StripAsciiWhitespace(piece));
        const bool valid = !name.empty() && name.size() < IFNAMSIZ &&
                           name.find_first_of("/ \t\n") == std::string::npos;
        if (!valid) {
          return InvalidSetting(*interfaces, absl::StrCat("'", name,
                                                          "' is not a network interface name "
                                                          "(e.g. eth0)"));
        }
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      }
    }
    spec->set_network_interface(names.front());
    for (const std::string& name : names) spec->add_network_interfaces(name);
  }
  return absl::OkStatus();
}

}  // namespace horovodd::cli
