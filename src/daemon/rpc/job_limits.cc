#include "daemon/rpc/job_limits.h"

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {

absl::Status ApplyJobLimits(const DaemonLimits& limits, int unfinished_jobs, v1::JobSpec& spec) {
  if (unfinished_jobs >= limits.max_jobs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this horovodd runs at most ", limits.max_jobs,
                     " unfinished jobs at once (limits.max_jobs) and has ", unfinished_jobs,
                     "; submit again when one has ended"));
  }
  // Only an elastic job grows; a fixed-size one stays at num_proc.
  if (spec.elastic() && spec.max_np() == 0) spec.set_max_np(limits.max_workers_per_job);
  return absl::OkStatus();
}

KvLimits KvLimitsOf(const DaemonLimits& limits) {
  KvLimits kv;
  kv.max_key_bytes = static_cast<size_t>(limits.max_kv_key_bytes);
  kv.max_value_bytes = static_cast<size_t>(limits.max_kv_value_bytes);
  kv.max_keys = static_cast<size_t>(limits.max_kv_keys_per_job);
  kv.max_bytes = static_cast<size_t>(limits.max_kv_bytes_per_job);
  kv.max_waiters = static_cast<size_t>(limits.max_kv_waiters_per_job);
  return kv;
}

}  // namespace horovodd::daemon
