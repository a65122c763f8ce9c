#include "worker_runtime/runtime/runtime.h"

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_runtime/runtime/environment.h"

namespace horovodd::internal {

std::string OptionalEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

namespace {

constexpr char kNotLaunched[] = "this process was not launched by horovodrun/horovodd";

absl::StatusOr<std::string> RequiredEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return absl::FailedPreconditionError(absl::StrCat(name, " is not set: ", kNotLaunched));
  }
  return std::string(value);
}

// A positive number of `unit`s from `name`, or `fallback` when it is unset.
absl::StatusOr<absl::Duration> DurationEnv(const char* name, absl::Duration unit,
                                           absl::Duration fallback) {
  const std::string text = OptionalEnv(name);
  if (text.empty()) return fallback;
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !(value > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a positive number, got '", text, "'"));
  }
  return value * unit;
}

// "1" on, "0" off, unset automatic; anything else is an error.
absl::StatusOr<HierarchicalAllreduce> HierarchicalFromEnvironment() {
  const std::string text = OptionalEnv("HOROVOD_HIERARCHICAL_ALLREDUCE");
  if (text.empty()) return HierarchicalAllreduce::kAuto;
  if (text == "1") return HierarchicalAllreduce::kOn;
  if (text == "0") return HierarchicalAllreduce::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("HOROVOD_HIERARCHICAL_ALLREDUCE must be 0 or 1, got '", text, "'"));
}

absl::StatusOr<bool> ShmFromEnvironment() {
  const std::string text = OptionalEnv("HOROVODD_SHM");
  if (text.empty() || text == "1") return true;
  if (text == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat("HOROVODD_SHM must be 0 or 1, got '", text, "'"));
}

}  // namespace

absl::StatusOr<RuntimeOptions> RuntimeOptions::FromEnvironment() {
  RuntimeOptions options;
  HVDD_ASSIGN_OR_RETURN(options.daemon.address, RequiredEnv("HOROVODD_DAEMON_ADDR"));
  HVDD_ASSIGN_OR_RETURN(options.daemon.job_id, RequiredEnv("HOROVODD_JOB_ID"));
  HVDD_ASSIGN_OR_RETURN(const std::string worker, RequiredEnv("HOROVODD_WORKER_ID"));
  if (!absl::SimpleAtoi(worker, &options.daemon.worker_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("HOROVODD_WORKER_ID must be an integer, got '", worker, "'"));
  }
  options.daemon.token = OptionalEnv("HOROVODD_WORKER_TOKEN");
  options.daemon.relayed = OptionalEnv("HOROVODD_DAEMON_RELAYED") == "1";
  options.daemon.tls_ca_file = OptionalEnv("HOROVODD_TLS_CA");
  options.daemon.tls_cert_file = OptionalEnv("HOROVODD_TLS_CERT");
  options.daemon.tls_key_file = OptionalEnv("HOROVODD_TLS_KEY");
  options.daemon.tls = OptionalEnv("HOROVODD_TLS") == "1" || !options.daemon.tls_ca_file.empty();

  HVDD_ASSIGN_OR_RETURN(options.daemon.heartbeat_interval,
                        DurationEnv("HOROVODD_HEARTBEAT_MS", absl::Milliseconds(1),
                                    options.daemon.heartbeat_interval));
  HVDD_ASSIGN_OR_RETURN(
      options.daemon.daemon_grace,
      DurationEnv("HOROVODD_DAEMON_GRACE_S", absl::Seconds(1), options.daemon.daemon_grace));
  // Horovod's name for the same bound (horovodrun --gloo-timeout-seconds); ours wins.
  HVDD_ASSIGN_OR_RETURN(
      options.ring_timeout,
      DurationEnv("HOROVOD_GLOO_TIMEOUT_SECONDS", absl::Seconds(1), options.ring_timeout));
  HVDD_ASSIGN_OR_RETURN(
      options.ring_timeout,
      DurationEnv("HOROVODD_RING_TIMEOUT_S", absl::Seconds(1), options.ring_timeout));
  HVDD_ASSIGN_OR_RETURN(options.gpu_operations, GpuOperationsFromEnvironment());
  HVDD_ASSIGN_OR_RETURN(options.engine, EngineOptions::FromEnvironment());
  HVDD_ASSIGN_OR_RETURN(options.local.enabled, ShmFromEnvironment());
  HVDD_ASSIGN_OR_RETURN(options.local.hierarchical, HierarchicalFromEnvironment());
  if (const std::string slot = OptionalEnv("HOROVODD_SHM_SLOT_BYTES"); !slot.empty()) {
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(slot, &bytes) || bytes < 4096 || bytes > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HOROVODD_SHM_SLOT_BYTES must be a byte count from 4096 to 1 GiB, got '", slot, "'"));
    }
    options.local.slot_bytes = static_cast<size_t>(bytes);
  }
  if (const std::string from = OptionalEnv("HOROVODD_SHM_DECIDER_FROM"); !from.empty()) {
    int ranks = 0;
    if (!absl::SimpleAtoi(from, &ranks) || ranks < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HOROVODD_SHM_DECIDER_FROM must be a number of local ranks (0: never), got '", from,
          "'"));
    }
    options.local.rank_zero_decides_from = ranks;
  }
  HVDD_ASSIGN_OR_RETURN(options.stall, StallOptions::FromEnvironment());
  return options;
}

}  // namespace horovodd::internal
