// The checks every RPC request passes before the daemon acts on it: pure
// functions of the request and the daemon's limits, with no gRPC types and no
// daemon state, so the services call them first thing and the fuzz targets
// (tests/fuzz) call them on arbitrary bytes.
//
// Malformed input is INVALID_ARGUMENT with a message naming the field
// ("argv[2] holds a NUL byte", "env: name 'A-B' is not valid ..."). Input
// that is well formed but bigger than a configured limit is
// RESOURCE_EXHAUSTED naming the limit's config key ("limits.max_kv_value_bytes").
// What depends on daemon state (how many jobs run, how many keys a job holds,
// whether a job exists) is checked where that state lives.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/config/daemon_config.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// JobService.
absl::Status ValidateRequest(const v1::SubmitJobRequest& request, const DaemonLimits& limits);
absl::Status ValidateRequest(const v1::GetJobRequest& request, const DaemonLimits& limits);
absl::Status ValidateRequest(const v1::ListJobsRequest& request, const DaemonLimits& limits);
absl::Status ValidateRequest(const v1::WatchJobRequest& request, const DaemonLimits& limits);
absl::Status ValidateRequest(const v1::CancelJobRequest& request, const DaemonLimits& limits);
// DrainHost and UndrainHost.
absl::Status ValidateRequest(const v1::DrainHostRequest& request, const DaemonLimits& limits);
absl::Status ValidateRequest(const v1::GetWorkerOutputRequest& request, const DaemonLimits& limits);
absl::Status ValidateRequest(const v1::StopDaemonRequest& request, const DaemonLimits& limits);

// WorkerService.
absl::Status ValidateRequest(const v1::KvSetRequest& request, const DaemonLimits& limits);
absl::Status ValidateRequest(const v1::KvGetRequest& request, const DaemonLimits& limits);
// One message of an Attach stream (a hello, a heartbeat or a rendezvous).
// A heartbeat's activity is not checked here: see ValidateWorkerActivity.
absl::Status ValidateRequest(const v1::WorkerMessage& request, const DaemonLimits& limits);
// What a worker reports doing (Heartbeat.activity): bounded names, counts
// >= 0, finite seconds. A report that fails is dropped, not the heartbeat
// that carried it.
absl::Status ValidateWorkerActivity(const v1::WorkerActivity& activity);
absl::Status ValidateRequest(const v1::CommitReport& request, const DaemonLimits& limits);
absl::Status ValidateRequest(const v1::FailureReport& request, const DaemonLimits& limits);

// A job spec on its own, without size limits: argv, environment, process
// counts, hosts, timeouts, SSH settings. What JobManager::Submit checks for
// callers inside the daemon too (ValidateJobSpec in job_driver.h).
absl::Status ValidateJobSpecFields(const v1::JobSpec& spec);

// The parts, for callers that check one value (`field` names it in messages).
// A job id as the daemon makes them: 1 to 128 of [A-Za-z0-9._-].
absl::Status ValidateJobId(absl::string_view field, absl::string_view job_id);
// SubmitJobRequest.client_request_id: empty, or 16 to 128 of [A-Za-z0-9._-]
// (long enough to be random: two clients' ids must not meet).
inline constexpr size_t kMinClientRequestIdBytes = 16;
inline constexpr size_t kMaxClientRequestIdBytes = 128;
absl::Status ValidateClientRequestId(absl::string_view id);
// A host name or IP address (IPv6 may be in brackets): 1 to 255 of
// [A-Za-z0-9.-_:[]], not starting with '-' (it reaches ssh and logs).
absl::Status ValidateHostName(absl::string_view field, absl::string_view host);
// [A-Za-z_][A-Za-z0-9_]*, as POSIX shells accept.
bool IsValidEnvName(absl::string_view name);
// Names the daemon sets itself for every worker (its identity, its daemon's
// address, credentials); a job spec may not set them.
bool IsReservedEnvName(absl::string_view name);

}  // namespace horovodd::daemon
