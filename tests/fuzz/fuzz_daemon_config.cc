// horovodd's config loader on arbitrary YAML. A refusal is fine (it must be
// INVALID_ARGUMENT with a message); an accepted config must hold only values
// the setters allow.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "daemon/config/daemon_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = horovodd::daemon::ParseDaemonConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    if (config.status().code() != absl::StatusCode::kInvalidArgument ||
        config.status().message().empty()) {
      std::abort();
    }
    return 0;
  }
  const auto& limits = config->limits;
  if (limits.max_jobs < 1 || limits.max_workers_per_job < 1 || limits.max_message_bytes < 1 ||
      limits.max_kv_value_bytes < 1 || limits.max_kv_keys_per_job < 1) {
    std::abort();
  }
  return 0;
}
