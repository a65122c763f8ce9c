#include "discovery/host_source.h"

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

}  // namespace

std::unique_ptr<HostSource> MakeScriptHostSource(std::string path, int default_slots,
                                                 absl::Duration timeout) {
  return std::make_unique<ScriptHostSource>(std::move(path), default_slots, timeout);
}

}  // namespace horovodd::discovery
