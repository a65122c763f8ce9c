// The daemon's limits on what clients may ask (DaemonLimits, config key
// `limits`), so that no client can exhaust it: the parts that depend on daemon
// state. GuardedJobService (guarded_job_service.h) applies them to JobService
// calls, after each request's validation (request_validation.h).
#pragma once

#include "absl/status/status.h"
#include "daemon/config/daemon_config.h"
#include "daemon/kv_namespace/kv_namespace.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// Refuses one more job when `unfinished_jobs` jobs have not ended
// (limits.max_jobs), and caps the max_np of an elastic job that has none at
// limits.max_workers_per_job. What depends on the spec alone (its size, its
// worker counts) is ValidateRequest's (request_validation.h).
absl::Status ApplyJobLimits(const DaemonLimits& limits, int unfinished_jobs, v1::JobSpec& spec);

// What each job's key-value namespace may hold under `limits`.
KvLimits KvLimitsOf(const DaemonLimits& limits);

}  // namespace horovodd::daemon
