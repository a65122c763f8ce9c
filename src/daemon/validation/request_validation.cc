#include "daemon/validation/request_validation.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::daemon {
namespace {

// Caps on free text that ends up in events, logs and the journal. Fixed, not
// configured: no legitimate client comes near them.
constexpr size_t kMaxJobIdBytes = 128;
constexpr size_t kMaxHostBytes = 255;
constexpr size_t kMaxTokenBytes = 1024;
constexpr size_t kMaxNameBytes = 256;   // JobSpec.name
constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX
constexpr size_t kMaxInterfaceBytes = 64;
constexpr int kMaxHotSpares = 4096;
constexpr size_t kMaxReasonBytes = 4096;  // CancelJob
constexpr size_t kMaxFailureMessageBytes = 64 * 1024;
// A reported collective: workers cut longer tensor names to fit.
constexpr size_t kMaxCollectiveNameBytes = 1024;
// A transfer waits on a few peers (a ring's neighbours, a tree's children).
constexpr int kMaxWaitingOnRanks = 64;
constexpr size_t kMaxOperationBytes = 64;
// Ten years: "never" for any job, and far from absl::Duration's overflow.
constexpr double kMaxSeconds = 10.0 * 365 * 24 * 3600;

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", why));
}

bool HasNul(absl::string_view text) { return text.find('\0') != absl::string_view::npos; }

// Free text: no NUL (it cannot reach exec, a path or a C string intact) and
// at most `max_bytes`.
absl::Status CheckText(absl::string_view field, absl::string_view text, size_t max_bytes) {
  if (HasNul(text)) return Invalid(field, "holds a NUL byte");
  if (text.size() > max_bytes) {
    return Invalid(
        field, absl::StrCat("is ", text.size(), " bytes; at most ", max_bytes, " are accepted"));
  }
  return absl::OkStatus();
}

absl::Status CheckNotNegative(absl::string_view field, int64_t value) {
  if (value < 0) return Invalid(field, absl::StrCat("must be >= 0, got ", value));
  return absl::OkStatus();
}

// A number of seconds: finite, within [0, kMaxSeconds], and above 0 when
// `positive`. NaN fails every comparison, so it is tested first.
absl::Status CheckSeconds(absl::string_view field, double seconds, bool positive) {
  if (!std::isfinite(seconds)) return Invalid(field, "must be a finite number of seconds");
  if (positive ? seconds <= 0 : seconds < 0) {
    return Invalid(field,
                   absl::StrCat("must be ", positive ? "> 0" : ">= 0", " seconds, got ", seconds));
  }
  if (seconds > kMaxSeconds) {
    return Invalid(field, absl::StrCat("is ", seconds, " seconds; at most ", kMaxSeconds,
                                       " (ten years) are accepted"));
  }
  return absl::OkStatus();
}

absl::Status CheckIdentity(const v1::WorkerIdentity& who) {
  HVDD_RETURN_IF_ERROR(ValidateJobId("who.job_id", who.job_id()));
  if (who.worker_id() < 1) {
    return Invalid("who.worker_id", absl::StrCat("must be >= 1, got ", who.worker_id()));
  }
  return CheckText("who.token", who.token(), kMaxTokenBytes);
}

// A KV key as a request carries it; the limit is also enforced by the
// job's KvNamespace, which names the same config key.
absl::Status CheckKvKey(absl::string_view field, absl::string_view key,
                        const DaemonLimits& limits) {
  if (key.empty()) return Invalid(field, "is empty");
  if (key.size() > static_cast<size_t>(limits.max_kv_key_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(field, " is ", key.size(), " bytes; the limit is ", limits.max_kv_key_bytes,
                     " bytes (limits.max_kv_key_bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckArgv(const v1::JobSpec& spec) {
  if (spec.argv().empty() || spec.argv(0).empty()) {
    return absl::InvalidArgumentError("argv is empty: nothing to run");
  }
  for (int i = 0; i < spec.argv_size(); ++i) {
    if (HasNul(spec.argv(i))) return Invalid(absl::StrCat("argv[", i, "]"), "holds a NUL byte");
  }
  return absl::OkStatus();
}

absl::Status CheckEnv(const v1::JobSpec& spec) {
  for (const auto& [name, value] : spec.env()) {
    if (!IsValidEnvName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("env: environment variable name '", absl::CEscape(name),
                       "' is not valid (letters, digits and '_', not starting with a digit)"));
    }
    if (IsReservedEnvName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("env: ", name,
                       " is reserved: the daemon sets it for every worker (its identity, "
                       "address or credentials)"));
    }
    if (HasNul(value)) return Invalid(absl::StrCat("env[", name, "]"), "holds a NUL byte");
  }
  return absl::OkStatus();
}

absl::Status CheckProcessCounts(const v1::JobSpec& spec) {
  if (spec.min_np() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_np must be at least 1, got ", spec.min_np()));
  }
  if (spec.max_np() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_np must be >= 0 (0 = no limit), got ", spec.max_np()));
  }
  if (spec.max_np() > 0 && spec.min_np() > spec.max_np()) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_np (", spec.min_np(), ") is greater than max_np (", spec.max_np(), ")"));
  }
  if (spec.num_proc() < spec.min_np() || (spec.max_np() > 0 && spec.num_proc() > spec.max_np())) {
    return absl::InvalidArgumentError(absl::StrCat("num_proc (", spec.num_proc(),
                                                   ") is outside [min_np, max_np] = [",
                                                   spec.min_np(), ", ", spec.max_np(), "]"));
  }
  if (spec.reset_limit() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reset_limit must be >= 0 (0 = no limit), got ", spec.reset_limit()));
  }
  if (spec.hot_spares() < 0 || spec.hot_spares() > kMaxHotSpares) {
    return absl::InvalidArgumentError(
        absl::StrCat("hot_spares must be in [0, ", kMaxHotSpares, "], got ", spec.hot_spares()));
  }
  if (spec.hot_spares() > 0 && !spec.elastic()) {
    // A fixed-size job ends at its first failure: a spare would never be used.
    return absl::InvalidArgumentError(
        "hot_spares needs an elastic job (--min-np, --max-np or host discovery)");
  }
  return absl::OkStatus();
}

absl::Status CheckDiscovery(const v1::DiscoverySpec& d) {
  if (d.slurm() && (!d.script().empty() || !d.hosts().empty())) {
    return absl::InvalidArgumentError(
        "Slurm host discovery excludes a discovery script and a static host list");
  }
  if (d.script().empty() && d.hosts().empty() && !d.slurm()) {
    return absl::InvalidArgumentError("no hosts: give a discovery script or a host list");
  }
  if (!d.script().empty() && !d.hosts().empty()) {
    return absl::InvalidArgumentError(
        "a discovery script and a static host list are mutually exclusive");
  }
  HVDD_RETURN_IF_ERROR(CheckText("discovery.script", d.script(), kMaxPathBytes));
  for (int i = 0; i < d.hosts_size(); ++i) {
    const auto& h = d.hosts(i);
    const std::string field = absl::StrCat("discovery.hosts[", i, "]");
    if (h.host().empty() || h.slots() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": host '", absl::CEscape(h.host()),
                                                     "' needs a name and at least 1 slot"));
    }
    HVDD_RETURN_IF_ERROR(ValidateHostName(absl::StrCat(field, ".host"), h.host()));
  }
  if (d.default_slots() < 0) {
    return Invalid("discovery.default_slots",
                   absl::StrCat("must be >= 0, got ", d.default_slots()));
  }
  if (auto st = CheckSeconds("discovery.interval_seconds", d.interval_seconds(), true); !st.ok()) {
    return st;
  }
  return CheckSeconds("discovery.script_timeout_seconds", d.script_timeout_seconds(), true);
}

absl::Status CheckTimeouts(const v1::JobSpec& spec) {
  const std::pair<const char*, double> kPositive[] = {
      {"elastic_timeout_seconds", spec.elastic_timeout_seconds()},
      {"start_timeout_seconds", spec.start_timeout_seconds()},
      {"liveness_timeout_seconds", spec.liveness_timeout_seconds()},
  };
  for (const auto& [field, seconds] : kPositive) {
    HVDD_RETURN_IF_ERROR(CheckSeconds(field, seconds, true));
  }
  const double lo = spec.blacklist_cooldown_min_seconds();
  const double hi = spec.blacklist_cooldown_max_seconds();
  HVDD_RETURN_IF_ERROR(CheckSeconds("blacklist_cooldown_min_seconds", lo, false));
  HVDD_RETURN_IF_ERROR(CheckSeconds("blacklist_cooldown_max_seconds", hi, false));
  if (lo > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "blacklist cooldown range must satisfy 0 <= LO <= HI, got LO ", lo, " and HI ", hi));
  }
  const double factor = spec.evict_stragglers();
  if (!std::isfinite(factor) || (factor != 0 && factor < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("evict_stragglers must be 0 (off) or at least 1, got ", factor));
  }
  return absl::OkStatus();
}

absl::Status CheckSsh(const v1::SshSpec& ssh) {
  if (ssh.port() < 0 || ssh.port() > 65535) {
    return Invalid("ssh.port", absl::StrCat("must be 0 (= 22) to 65535, got ", ssh.port()));
  }
  HVDD_RETURN_IF_ERROR(CheckText("ssh.user", ssh.user(), kMaxNameBytes));
  if (absl::StartsWith(ssh.user(), "-")) return Invalid("ssh.user", "may not start with '-'");
  if (auto st = CheckText("ssh.identity_file", ssh.identity_file(), kMaxPathBytes); !st.ok()) {
    return st;
  }
  if (auto st = CheckText("ssh.known_hosts_file", ssh.known_hosts_file(), kMaxPathBytes);
      !st.ok()) {
    return st;
  }
  const std::string& checking = ssh.host_key_checking();
  if (!checking.empty() && checking != "strict" && checking != "accept-new" && checking != "off") {
    return Invalid(
        "ssh.host_key_checking",
        absl::StrCat("'", absl::CEscape(checking), "' is not one of strict, accept-new, off"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidEnvName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool IsReservedEnvName(absl::string_view name) {
  // What WorkerStarter::Environment sets from the daemon's own knowledge, and
  // the credentials it hands workers. Tunables (HOROVODD_RING_TIMEOUT_S...)
  // stay the user's.
  static constexpr absl::string_view kReserved[] = {
      "HOROVODD_DAEMON_ADDR",  "HOROVODD_JOB_ID",    "HOROVODD_WORKER_ID",
      "HOROVODD_WORKER_TOKEN", "HOROVODD_BIND_ADDR", "HOROVODD_NETWORK_INTERFACE",
      "HOROVOD_RANK",          "HOROVOD_HOSTNAME",   "HOROVODD_NODE_ADDR",
  };
  for (absl::string_view reserved : kReserved) {
    if (name == reserved) return true;
  }
  return absl::StartsWith(name, "HOROVODD_TLS_");
}

absl::Status ValidateJobId(absl::string_view field, absl::string_view job_id) {
  if (job_id.empty()) return Invalid(field, "is empty");
  if (job_id.size() > kMaxJobIdBytes) {
    return Invalid(
        field, absl::StrCat("is ", job_id.size(), " bytes; job ids are at most ", kMaxJobIdBytes));
  }
  for (char c : job_id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return Invalid(field, absl::StrCat("'", absl::CEscape(job_id),
                                         "' is not a job id (letters, digits, '-', '_', '.')"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateClientRequestId(absl::string_view id) {
  constexpr absl::string_view kField = "client_request_id";
  if (id.empty()) return absl::OkStatus();
  if (id.size() < kMinClientRequestIdBytes || id.size() > kMaxClientRequestIdBytes) {
    return Invalid(kField, absl::StrCat("is ", id.size(), " characters; it must be ",
                                        kMinClientRequestIdBytes, " to ", kMaxClientRequestIdBytes,
                                        " (a random id, e.g. 32 hex digits), or empty"));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return Invalid(kField, absl::StrCat("'", absl::CEscape(id),
                                          "' holds a character other than letters, digits, "
                                          "'-', '_', '.'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateHostName(absl::string_view field, absl::string_view host) {
  if (host.empty()) return Invalid(field, "is empty");
  if (host.size() > kMaxHostBytes) {
    return Invalid(
        field, absl::StrCat("is ", host.size(), " bytes; host names are at most ", kMaxHostBytes));
  }
  bool ok = host.front() != '-';
  for (char c : host) {
    ok = ok && (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                c == '_' || c == ':' || c == '[' || c == ']');
  }
  if (!ok) {
    return Invalid(field, absl::StrCat("'", absl::CEscape(host),
                                       "' is not a host name or IP address (letters, digits, "
                                       "'.', '-', '_', ':', not starting with '-')"));
  }
  return absl::OkStatus();
}

// --launcher and the Slurm allocation that --launcher slurm and
// --host-discovery slurm work in (its id reaches srun and scontrol's argv).
absl::Status CheckLauncher(const v1::JobSpec& spec) {
  const std::string& launcher = spec.launcher();
  if (!launcher.empty() && launcher != "local" && launcher != "ssh" && launcher != "slurm") {
    return Invalid("launcher", absl::StrCat("'", absl::CEscape(launcher.substr(0, 64)),
                                            "' is not one of local, ssh, slurm"));
  }
  const bool needs_slurm = launcher == "slurm" || spec.discovery().slurm();
  const std::string& id = spec.slurm().job_id();
  if (!needs_slurm && id.empty()) return absl::OkStatus();
  bool ok = !id.empty() && id.size() <= 32 && absl::ascii_isdigit(id.front());
  for (char c : id) ok = ok && (absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) {
    return Invalid("slurm.job_id",
                   absl::StrCat("'", absl::CEscape(id.substr(0, 64)),
                                "' is not a Slurm job id (the launcher and host discovery "
                                "'slurm' need one: run inside salloc or sbatch)"));
  }
  HVDD_RETURN_IF_ERROR(CheckText("slurm.node_list", spec.slurm().node_list(), kMaxPathBytes));
  return CheckText("slurm.tasks_per_node", spec.slurm().tasks_per_node(), kMaxPathBytes);
}

absl::Status ValidateJobSpecFields(const v1::JobSpec& spec) {
  absl::Status status = CheckArgv(spec);
  if (status.ok()) status = CheckEnv(spec);
  if (status.ok()) status = CheckText("working_dir", spec.working_dir(), kMaxPathBytes);
  if (status.ok()) status = CheckText("name", spec.name(), kMaxNameBytes);
  if (status.ok()) status = CheckProcessCounts(spec);
  if (status.ok()) status = CheckDiscovery(spec.discovery());
  if (status.ok()) status = CheckTimeouts(spec);
  if (status.ok()) status = CheckSsh(spec.ssh());
  if (status.ok()) status = CheckLauncher(spec);
  if (status.ok() && !spec.network_interface().empty()) {
    status = CheckText("network_interface", spec.network_interface(), kMaxInterfaceBytes);
  }
  for (const std::string& name : spec.network_interfaces()) {
    if (!status.ok()) break;
    // Joined with ',' into NCCL_SOCKET_IFNAME: a comma inside one name would split it.
    status = CheckText("network_interfaces", name, kMaxInterfaceBytes);
    if (status.ok() && (name.empty() || name.find(',') != std::string::npos)) {
      status = Invalid("network_interfaces",
                       absl::StrCat("'", absl::CEscape(name), "' is not an interface name"));
    }
  }
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("invalid job spec: ", status.message()));
}

absl::Status ValidateRequest(const v1::SubmitJobRequest& request, const DaemonLimits& limits) {
  HVDD_RETURN_IF_ERROR(ValidateClientRequestId(request.client_request_id()));
  const v1::JobSpec& spec = request.spec();
  // Size first: the field checks below walk the whole spec.
  const size_t bytes = spec.ByteSizeLong();
  if (bytes > static_cast<size_t>(limits.max_job_spec_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the job spec is ", bytes, " bytes (argv, env, hosts...); the limit is ",
                     limits.max_job_spec_bytes, " bytes (limits.max_job_spec_bytes)"));
  }
  HVDD_RETURN_IF_ERROR(ValidateJobSpecFields(spec));
  const int most = limits.max_workers_per_job;
  for (const auto& [field, value] : {std::pair<const char*, int>{"num_proc", spec.num_proc()},
                                     std::pair<const char*, int>{"max_np", spec.max_np()}}) {
    if (value > most) {
      return absl::ResourceExhaustedError(
          absl::StrCat(field, " ", value, " is over this horovodd's limit of ", most,
                       " workers per job (limits.max_workers_per_job)"));
    }
  }
  for (int i = 0; i < spec.discovery().hosts_size(); ++i) {
    if (spec.discovery().hosts(i).slots() > most) {
      return absl::ResourceExhaustedError(
          absl::StrCat("discovery.hosts[", i, "].slots ", spec.discovery().hosts(i).slots(),
                       " is over this horovodd's limit of ", most,
                       " workers per job (limits.max_workers_per_job)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const v1::GetJobRequest& request, const DaemonLimits&) {
  return ValidateJobId("job_id", request.job_id());
}

absl::Status ValidateRequest(const v1::ListJobsRequest&, const DaemonLimits&) {
  return absl::OkStatus();
}

absl::Status ValidateRequest(const v1::WatchJobRequest& request, const DaemonLimits&) {
  return ValidateJobId("job_id", request.job_id());
}

absl::Status ValidateRequest(const v1::CancelJobRequest& request, const DaemonLimits&) {
  HVDD_RETURN_IF_ERROR(ValidateJobId("job_id", request.job_id()));
  return CheckText("reason", request.reason(), kMaxReasonBytes);
}

absl::Status ValidateRequest(const v1::StopDaemonRequest& request, const DaemonLimits&) {
  return CheckText("reason", request.reason(), kMaxReasonBytes);
}

absl::Status ValidateRequest(const v1::DrainHostRequest& request, const DaemonLimits&) {
  if (request.host().empty()) return absl::InvalidArgumentError("no host given");
  HVDD_RETURN_IF_ERROR(ValidateHostName("host", request.host()));
  // No job id: every job of the daemon.
  if (request.job_id().empty()) return absl::OkStatus();
  return ValidateJobId("job_id", request.job_id());
}

absl::Status ValidateRequest(const v1::GetWorkerOutputRequest& request, const DaemonLimits&) {
  HVDD_RETURN_IF_ERROR(ValidateJobId("job_id", request.job_id()));
  if (request.rank() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("rank must be >= 0, got ", request.rank()));
  }
  return CheckNotNegative("max_lines", request.max_lines());
}

absl::Status ValidateRequest(const v1::KvSetRequest& request, const DaemonLimits& limits) {
  HVDD_RETURN_IF_ERROR(CheckIdentity(request.who()));
  HVDD_RETURN_IF_ERROR(CheckNotNegative("generation", request.generation()));
  HVDD_RETURN_IF_ERROR(CheckKvKey("key", request.key(), limits));
  if (request.value().size() > static_cast<size_t>(limits.max_kv_value_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "value of key '", absl::CEscape(request.key()), "' is ", request.value().size(),
        " bytes; the limit is ", limits.max_kv_value_bytes, " bytes (limits.max_kv_value_bytes)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const v1::KvGetRequest& request, const DaemonLimits& limits) {
  HVDD_RETURN_IF_ERROR(CheckIdentity(request.who()));
  HVDD_RETURN_IF_ERROR(CheckNotNegative("generation", request.generation()));
  if (request.keys_size() > limits.max_kv_keys_per_job) {
    return absl::ResourceExhaustedError(
        absl::StrCat("asked for ", request.keys_size(), " keys; a job holds at most ",
                     limits.max_kv_keys_per_job, " (limits.max_kv_keys_per_job)"));
  }
  for (int i = 0; i < request.keys_size(); ++i) {
    if (auto st = CheckKvKey(absl::StrCat("keys[", i, "]"), request.keys(i), limits); !st.ok()) {
      return st;
    }
  }
  // 0 = the daemon's default wait.
  return CheckSeconds("timeout_seconds", request.timeout_seconds(), false);
}

absl::Status ValidateRequest(const v1::WorkerMessage& request, const DaemonLimits&) {
  switch (request.body_case()) {
    case v1::WorkerMessage::kHello:
      return CheckIdentity(request.hello());
    case v1::WorkerMessage::kHeartbeat:
      return CheckNotNegative("heartbeat.generation", request.heartbeat().generation());
    case v1::WorkerMessage::kRendezvous:
      return CheckNotNegative("rendezvous.after_generation",
                              request.rendezvous().after_generation());
    default:
      return absl::InvalidArgumentError(
          "an Attach message must be a hello, a heartbeat or a rendezvous (body is not set)");
  }
}

absl::Status ValidateWorkerActivity(const v1::WorkerActivity& activity) {
  if (activity.has_waiting()) {
    const v1::CollectiveWait& wait = activity.waiting();
    HVDD_RETURN_IF_ERROR(CheckText("waiting.name", wait.name(), kMaxCollectiveNameBytes));
    HVDD_RETURN_IF_ERROR(CheckText("waiting.operation", wait.operation(), kMaxOperationBytes));
    HVDD_RETURN_IF_ERROR(CheckNotNegative("waiting.process_set", wait.process_set()));
    HVDD_RETURN_IF_ERROR(CheckSeconds("waiting.waited_seconds", wait.waited_seconds(), false));
    // The daemon places the wait on its own clock from waited_seconds; a
    // worker's clock need not agree with it, so a worker leaves this 0.
    if (wait.since_unix() != 0) {
      return absl::InvalidArgumentError(
          "waiting.since_unix is the daemon's to set (from waited_seconds); a worker leaves it 0");
    }
  }
  HVDD_RETURN_IF_ERROR(CheckNotNegative("pending", activity.pending()));
  HVDD_RETURN_IF_ERROR(CheckNotNegative("completed", activity.completed()));
  HVDD_RETURN_IF_ERROR(CheckNotNegative("last_commit", activity.last_commit()));
  HVDD_RETURN_IF_ERROR(CheckSeconds("step_seconds", activity.step_seconds(), false));
  // A rate, bounded as seconds are: finite and not negative.
  HVDD_RETURN_IF_ERROR(CheckSeconds("steps_per_second", activity.steps_per_second(), false));
  HVDD_RETURN_IF_ERROR(CheckSeconds("step_wait_seconds", activity.step_wait_seconds(), false));
  if (activity.waiting_on_ranks_size() > kMaxWaitingOnRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("waiting_on_ranks names more than ", kMaxWaitingOnRanks, " ranks"));
  }
  for (int32_t rank : activity.waiting_on_ranks()) {
    HVDD_RETURN_IF_ERROR(CheckNotNegative("waiting_on_ranks", rank));
  }
  HVDD_RETURN_IF_ERROR(CheckSeconds("waiting_on_seconds", activity.waiting_on_seconds(), false));
  if (activity.since_commit_seconds() != -1) {  // -1: no commit yet
    HVDD_RETURN_IF_ERROR(
        CheckSeconds("since_commit_seconds", activity.since_commit_seconds(), false));
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const v1::CommitReport& request, const DaemonLimits&) {
  HVDD_RETURN_IF_ERROR(CheckIdentity(request.who()));
  HVDD_RETURN_IF_ERROR(CheckNotNegative("generation", request.generation()));
  return CheckNotNegative("commit", request.commit());
}

absl::Status ValidateRequest(const v1::FailureReport& request, const DaemonLimits&) {
  HVDD_RETURN_IF_ERROR(CheckIdentity(request.who()));
  HVDD_RETURN_IF_ERROR(CheckNotNegative("generation", request.generation()));
  return CheckText("message", request.message(), kMaxFailureMessageBytes);
}

}  // namespace horovodd::daemon
