// The checks of every RPC request (src/daemon/validation/request_validation.*): what a
// client sends wrong is refused with INVALID_ARGUMENT naming the field, what
// it sends too big with RESOURCE_EXHAUSTED naming the limit's config key.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "daemon/validation/request_validation.h"
#include "job_spec_support.h"

using namespace horovodd;
using daemon::DaemonLimits;
using daemon::ValidateRequest;

namespace {

// A spec the daemon accepts: one local worker running /bin/true.
v1::SubmitJobRequest ValidSubmit() {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = testing::OneLocalWorkerSpec({"/bin/true"});
  return request;
}

v1::WorkerIdentity Worker() {
  v1::WorkerIdentity who;
  who.set_job_id("job-1");
  who.set_worker_id(1);
  who.set_token("secret");
  return who;
}

#define CHECK_REFUSED(status_expr, code_, text)                    \
  do {                                                             \
    const absl::Status st_ = (status_expr);                        \
    CHECK(st_.code() == absl::StatusCode::code_);                  \
    CHECK_THAT(std::string(st_.message()), Catch::Contains(text)); \
  } while (false)

const DaemonLimits kLimits;

}  // namespace

TEST_CASE("a valid job spec passes") {
  CHECK(ValidateRequest(ValidSubmit(), kLimits).ok());
  v1::SubmitJobRequest request = ValidSubmit();
  (*request.mutable_spec()->mutable_env())["HOROVODD_RING_TIMEOUT_S"] = "5";  // a tunable
  (*request.mutable_spec()->mutable_env())["_X1"] = "it's $(not) run; \n at all";
  CHECK(ValidateRequest(request, kLimits).ok());
}

TEST_CASE("argv must be a non-empty list without NUL bytes") {
  v1::SubmitJobRequest request = ValidSubmit();
  request.mutable_spec()->clear_argv();
  CHECK_REFUSED(ValidateRequest(request, kLimits), kInvalidArgument, "argv is empty");
  request.mutable_spec()->add_argv("");
  CHECK_REFUSED(ValidateRequest(request, kLimits), kInvalidArgument, "argv is empty");
  request = ValidSubmit();
  request.mutable_spec()->add_argv("ok");
  request.mutable_spec()->add_argv(std::string("a\0b", 3));
  CHECK_REFUSED(ValidateRequest(request, kLimits), kInvalidArgument, "argv[2] holds a NUL byte");
}

TEST_CASE("environment names are shell names and not the daemon's own") {
  for (const std::string name : {"", "1ABC", "A-B", "A B", "A=B", "$(id)", "Ä"}) {
    INFO("name: " << name);
    v1::SubmitJobRequest request = ValidSubmit();
    (*request.mutable_spec()->mutable_env())[name] = "x";
    CHECK_REFUSED(ValidateRequest(request, kLimits), kInvalidArgument, "is not valid");
  }
  for (const std::string name : {"HOROVODD_JOB_ID", "HOROVODD_WORKER_ID", "HOROVODD_WORKER_TOKEN",
                                 "HOROVODD_DAEMON_ADDR", "HOROVODD_TLS_CA", "HOROVOD_RANK"}) {
    INFO("name: " << name);
    v1::SubmitJobRequest request = ValidSubmit();
    (*request.mutable_spec()->mutable_env())[name] = "x";
    CHECK_REFUSED(ValidateRequest(request, kLimits), kInvalidArgument,
                  "env: " + name + " is reserved");
  }
  v1::SubmitJobRequest request = ValidSubmit();
  (*request.mutable_spec()->mutable_env())["OK"] = std::string("a\0b", 3);
  CHECK_REFUSED(ValidateRequest(request, kLimits), kInvalidArgument, "env[OK] holds a NUL byte");
  CHECK(daemon::IsValidEnvName("_"));
  CHECK(daemon::IsValidEnvName("a9_Z"));
  CHECK_FALSE(daemon::IsValidEnvName("9a"));
}

TEST_CASE("process counts, hosts and timeouts are checked by field") {
  auto refused = [](auto change) {
    v1::SubmitJobRequest request = ValidSubmit();
    change(*request.mutable_spec());
    return ValidateRequest(request, kLimits);
  };
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_min_np(0); }), kInvalidArgument,
                "min_np must be at least 1");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_min_np(3), s.set_num_proc(3); }),
                kInvalidArgument, "min_np (3) is greater than max_np (1)");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_num_proc(5); }), kInvalidArgument,
                "num_proc (5) is outside");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_reset_limit(-1); }), kInvalidArgument,
                "reset_limit must be >= 0");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_elastic(true), s.set_hot_spares(-1); }),
                kInvalidArgument, "hot_spares must be in [0, 4096]");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_elastic(false), s.set_hot_spares(1); }),
                kInvalidArgument, "hot_spares needs an elastic job");
  CHECK(refused([](v1::JobSpec& s) { s.set_elastic(true), s.set_hot_spares(1); }).ok());
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.mutable_discovery()->clear_hosts(); }),
                kInvalidArgument, "no hosts");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.mutable_discovery()->set_script("/x"); }),
                kInvalidArgument, "mutually exclusive");
  CHECK_REFUSED(
      refused([](v1::JobSpec& s) { s.mutable_discovery()->mutable_hosts(0)->set_host("-oProxy"); }),
      kInvalidArgument, "discovery.hosts[0].host '-oProxy' is not a host name");
  CHECK_REFUSED(
      refused([](v1::JobSpec& s) { s.mutable_discovery()->mutable_hosts(0)->set_host("a;b"); }),
      kInvalidArgument, "discovery.hosts[0].host");
  CHECK_REFUSED(
      refused([](v1::JobSpec& s) { s.mutable_discovery()->mutable_hosts(0)->set_slots(0); }),
      kInvalidArgument, "at least 1 slot");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_elastic_timeout_seconds(0); }), kInvalidArgument,
                "elastic_timeout_seconds must be > 0");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_start_timeout_seconds(std::nan("")); }),
                kInvalidArgument, "start_timeout_seconds must be a finite number");
  CHECK_REFUSED(refused([](v1::JobSpec& s) {
                  s.set_liveness_timeout_seconds(std::numeric_limits<double>::infinity());
                }),
                kInvalidArgument, "liveness_timeout_seconds must be a finite number");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_liveness_timeout_seconds(1e12); }),
                kInvalidArgument, "liveness_timeout_seconds is 1e+12 seconds");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_blacklist_cooldown_min_seconds(5); }),
                kInvalidArgument, "0 <= LO <= HI");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.mutable_ssh()->set_port(70000); }), kInvalidArgument,
                "ssh.port");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.mutable_ssh()->set_user("-oProxyCommand=x"); }),
                kInvalidArgument, "ssh.user may not start with '-'");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.mutable_ssh()->set_host_key_checking("yes"); }),
                kInvalidArgument, "ssh.host_key_checking 'yes' is not one of");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_working_dir(std::string("/tmp\0/x", 7)); }),
                kInvalidArgument, "working_dir holds a NUL byte");
  CHECK_REFUSED(refused([](v1::JobSpec& s) { s.set_name(std::string(1000, 'n')); }),
                kInvalidArgument, "name is 1000 bytes");
}

TEST_CASE("network interfaces are names NCCL_SOCKET_IFNAME can list") {
  v1::SubmitJobRequest request = ValidSubmit();
  request.mutable_spec()->add_network_interfaces("eth0");
  request.mutable_spec()->add_network_interfaces("ib0");
  CHECK(ValidateRequest(request, kLimits).ok());
  request.mutable_spec()->add_network_interfaces("eth1,eth2");
  CHECK_REFUSED(ValidateRequest(request, kLimits), kInvalidArgument,
                "network_interfaces 'eth1,eth2' is not an interface name");
  request.mutable_spec()->set_network_interfaces(2, "");
  CHECK_REFUSED(ValidateRequest(request, kLimits), kInvalidArgument, "network_interfaces");
}

TEST_CASE("a job past the size limits is RESOURCE_EXHAUSTED naming the config key") {
  DaemonLimits limits;
  limits.max_job_spec_bytes = 1000;
  v1::SubmitJobRequest request = ValidSubmit();
  (*request.mutable_spec()->mutable_env())["BIG"] = std::string(2000, 'x');
  CHECK_REFUSED(ValidateRequest(request, limits), kResourceExhausted,
                "(limits.max_job_spec_bytes)");
  limits = DaemonLimits();
  limits.max_workers_per_job = 4;
  request = ValidSubmit();
  request.mutable_spec()->set_max_np(8);
  CHECK_REFUSED(ValidateRequest(request, limits), kResourceExhausted,
                "max_np 8 is over this horovodd's limit of 4 workers per job "
                "(limits.max_workers_per_job)");
  request = ValidSubmit();
  request.mutable_spec()->mutable_discovery()->mutable_hosts(0)->set_slots(100);
  CHECK_REFUSED(ValidateRequest(request, limits), kResourceExhausted,
                "discovery.hosts[0].slots 100");
}

TEST_CASE("a submission's client request id: empty, or 16 to 128 of [A-Za-z0-9._-]") {
  const DaemonLimits limits;
  v1::SubmitJobRequest request = ValidSubmit();
  for (const std::string id :
       {std::string(), std::string(16, 'a'), std::string(128, 'Z'),
        std::string("0123456789abcdef0123456789abcdef"), std::string("Aa0-_.Aa0-_.Aa0-_.")}) {
    INFO(id);
    request.set_client_request_id(id);
    CHECK(ValidateRequest(request, limits).ok());
  }
  request.set_client_request_id(std::string(15, 'a'));
  CHECK_REFUSED(ValidateRequest(request, limits), kInvalidArgument,
                "client_request_id is 15 characters; it must be 16 to 128");
  request.set_client_request_id(std::string(129, 'a'));
  CHECK_REFUSED(ValidateRequest(request, limits), kInvalidArgument,
                "client_request_id is 129 characters");
  for (const std::string id :
       {std::string("with a space 0123456"), std::string("slash/0123456789ab"),
        std::string("nul\0in-the-middle-0", 19), std::string("ümlaut-0123456789")}) {
    INFO(id);
    request.set_client_request_id(id);
    CHECK_REFUSED(ValidateRequest(request, limits), kInvalidArgument,
                  "holds a character other than letters, digits");
  }
}

TEST_CASE("job ids, host names, ranks and reasons of the JobService calls") {
  v1::GetJobRequest get;
  CHECK_REFUSED(ValidateRequest(get, kLimits), kInvalidArgument, "job_id is empty");
  get.set_job_id("job-12");
  CHECK(ValidateRequest(get, kLimits).ok());
  get.set_job_id("job 12; rm -rf /");
  CHECK_REFUSED(ValidateRequest(get, kLimits), kInvalidArgument, "is not a job id");
  get.set_job_id(std::string(200, 'j'));
  CHECK_REFUSED(ValidateRequest(get, kLimits), kInvalidArgument, "job ids are at most 128");

  v1::WatchJobRequest watch;
  watch.set_job_id("../x");
  CHECK_REFUSED(ValidateRequest(watch, kLimits), kInvalidArgument, "job_id '../x'");

  v1::CancelJobRequest cancel;
  cancel.set_job_id("job-1");
  cancel.set_reason(std::string(5000, 'r'));
  CHECK_REFUSED(ValidateRequest(cancel, kLimits), kInvalidArgument, "reason is 5000 bytes");

  v1::DrainHostRequest drain;
  CHECK_REFUSED(ValidateRequest(drain, kLimits), kInvalidArgument, "no host given");
  drain.set_host("node-1.cluster");
  CHECK(ValidateRequest(drain, kLimits).ok());  // no job id: every job
  drain.set_host("[::1]");
  CHECK(ValidateRequest(drain, kLimits).ok());
  drain.set_host("a\nb");
  CHECK_REFUSED(ValidateRequest(drain, kLimits), kInvalidArgument, "host 'a\\nb'");
  drain.set_host("h");
  drain.set_job_id("job/1");
  CHECK_REFUSED(ValidateRequest(drain, kLimits), kInvalidArgument, "job_id");

  v1::GetWorkerOutputRequest output;
  output.set_job_id("job-1");
  output.set_rank(-1);
  CHECK_REFUSED(ValidateRequest(output, kLimits), kInvalidArgument, "rank must be >= 0, got -1");
  output.set_rank(0);
  output.set_max_lines(-5);
  CHECK_REFUSED(ValidateRequest(output, kLimits), kInvalidArgument, "max_lines must be >= 0");

  CHECK(ValidateRequest(v1::ListJobsRequest(), kLimits).ok());
}

TEST_CASE("worker requests: identity, generations, keys and values") {
  v1::KvSetRequest identified;
  identified.set_key("k");
  CHECK_REFUSED(ValidateRequest(identified, kLimits), kInvalidArgument, "who.job_id is empty");
  *identified.mutable_who() = Worker();
  CHECK(ValidateRequest(identified, kLimits).ok());
  identified.mutable_who()->set_worker_id(0);
  CHECK_REFUSED(ValidateRequest(identified, kLimits), kInvalidArgument, "who.worker_id");
  *identified.mutable_who() = Worker();
  identified.mutable_who()->set_token(std::string(2000, 't'));
  CHECK_REFUSED(ValidateRequest(identified, kLimits), kInvalidArgument, "who.token is 2000");
  *identified.mutable_who() = Worker();
  identified.set_generation(-1);
  CHECK_REFUSED(ValidateRequest(identified, kLimits), kInvalidArgument, "generation");

  DaemonLimits limits;
  limits.max_kv_key_bytes = 8;
  limits.max_kv_value_bytes = 16;
  limits.max_kv_keys_per_job = 3;
  v1::KvSetRequest set;
  *set.mutable_who() = Worker();
  set.set_generation(1);
  set.set_key("k");
  set.set_value(std::string(16, 'v'));
  CHECK(ValidateRequest(set, limits).ok());
  set.set_value(std::string(17, 'v'));
  CHECK_REFUSED(ValidateRequest(set, limits), kResourceExhausted,
                "value of key 'k' is 17 bytes; the limit is 16 bytes (limits.max_kv_value_bytes)");
  set.set_value("v");
  set.set_key("123456789");
  CHECK_REFUSED(ValidateRequest(set, limits), kResourceExhausted, "(limits.max_kv_key_bytes)");
  set.set_key("");
  CHECK_REFUSED(ValidateRequest(set, limits), kInvalidArgument, "key is empty");

  v1::KvGetRequest get;
  *get.mutable_who() = Worker();
  get.set_generation(1);
  get.add_keys("a");
  CHECK(ValidateRequest(get, limits).ok());
  for (int i = 0; i < 3; ++i) get.add_keys("b");
  CHECK_REFUSED(ValidateRequest(get, limits), kResourceExhausted, "(limits.max_kv_keys_per_job)");
  get.clear_keys();
  get.add_keys("ok");
  get.add_keys("waytoolongkey");
  CHECK_REFUSED(ValidateRequest(get, limits), kResourceExhausted, "keys[1] is 13 bytes");
  get.clear_keys();
  get.set_timeout_seconds(-1);
  CHECK_REFUSED(ValidateRequest(get, limits), kInvalidArgument, "timeout_seconds");
  get.set_timeout_seconds(std::nan(""));
  CHECK_REFUSED(ValidateRequest(get, limits), kInvalidArgument, "timeout_seconds");
}

TEST_CASE("Attach messages, commit and failure reports") {
  v1::WorkerMessage message;
  CHECK_REFUSED(ValidateRequest(message, kLimits), kInvalidArgument,
                "a hello, a heartbeat or a rendezvous");
  *message.mutable_hello() = Worker();
  CHECK(ValidateRequest(message, kLimits).ok());
  message.mutable_hello()->set_job_id("");
  CHECK_REFUSED(ValidateRequest(message, kLimits), kInvalidArgument, "who.job_id is empty");
  message.mutable_heartbeat()->set_generation(-3);
  CHECK_REFUSED(ValidateRequest(message, kLimits), kInvalidArgument, "heartbeat.generation");
  message.mutable_rendezvous()->set_after_generation(2);
  CHECK(ValidateRequest(message, kLimits).ok());
  message.mutable_rendezvous()->set_after_generation(-1);
  CHECK_REFUSED(ValidateRequest(message, kLimits), kInvalidArgument, "rendezvous.after_generation");

  v1::CommitReport commit;
  *commit.mutable_who() = Worker();
  commit.set_commit(-1);
  CHECK_REFUSED(ValidateRequest(commit, kLimits), kInvalidArgument, "commit must be >= 0");

  v1::FailureReport failure;
  *failure.mutable_who() = Worker();
  failure.set_message("ring broke");
  CHECK(ValidateRequest(failure, kLimits).ok());
  failure.set_message(std::string(100 * 1024, 'm'));
  CHECK_REFUSED(ValidateRequest(failure, kLimits), kInvalidArgument, "message is 102400 bytes");
}

TEST_CASE("a heartbeat's activity report: bounded names, counts and finite seconds") {
  using daemon::ValidateWorkerActivity;
  v1::WorkerActivity activity;
  CHECK(ValidateWorkerActivity(activity).ok());  // waits in nothing, no commit yet
  activity.mutable_waiting()->set_name("grad.w1");
  activity.mutable_waiting()->set_operation("allreduce");
  activity.mutable_waiting()->set_waited_seconds(3.5);
  activity.set_pending(2);
  activity.set_completed(41);
  activity.set_last_commit(7);
  activity.set_step_seconds(0.25);
  activity.set_steps_per_second(4);
  activity.set_since_commit_seconds(-1);
  CHECK(ValidateWorkerActivity(activity).ok());
  activity.set_since_commit_seconds(0.5);
  CHECK(ValidateWorkerActivity(activity).ok());

  // Each bad report differs from the good one in one field, which the error names.
  struct Bad {
    std::function<void(v1::WorkerActivity&)> spoil;
    std::string error;
  };
  const std::vector<Bad> cases = {
      {[](auto& a) { a.mutable_waiting()->set_name(std::string(4096, 'n')); },
       "waiting.name is 4096 bytes"},
      {[](auto& a) { a.mutable_waiting()->set_name(std::string("a\0b", 3)); },
       "waiting.name holds a NUL byte"},
      {[](auto& a) { a.mutable_waiting()->set_operation(std::string(100, 'o')); },
       "waiting.operation"},
      {[](auto& a) { a.mutable_waiting()->set_process_set(-1); }, "waiting.process_set"},
      {[](auto& a) { a.mutable_waiting()->set_waited_seconds(std::nan("")); },
       "waiting.waited_seconds"},
      {[](auto& a) { a.mutable_waiting()->set_waited_seconds(-2); }, "waiting.waited_seconds"},
      {[](auto& a) { a.mutable_waiting()->set_since_unix(1.7e9); },
       "waiting.since_unix is the daemon's to set"},
      {[](auto& a) { a.set_pending(-1); }, "pending"},
      {[](auto& a) { a.set_completed(-5); }, "completed"},
      {[](auto& a) { a.set_last_commit(-1); }, "last_commit"},
      {[](auto& a) { a.set_step_seconds(std::numeric_limits<double>::infinity()); },
       "step_seconds"},
      {[](auto& a) { a.set_steps_per_second(-1); }, "steps_per_second"},
      {[](auto& a) { a.set_since_commit_seconds(-3); }, "since_commit_seconds"},
  };
  for (const Bad& c : cases) {
    v1::WorkerActivity bad = activity;
    c.spoil(bad);
    const absl::Status st = ValidateWorkerActivity(bad);
    INFO(c.error);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains(c.error));
  }

  // The heartbeat itself passes whatever its report holds: the report alone is dropped.
  v1::WorkerMessage message;
  message.mutable_heartbeat()->set_generation(1);
  message.mutable_heartbeat()->mutable_activity()->set_pending(-1);
  CHECK(ValidateRequest(message, kLimits).ok());
}
