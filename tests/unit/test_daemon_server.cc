// DaemonServer as a service, in-process on 127.0.0.1:0 over real gRPC: health
// checking and reflection answer, the job limits hold, RPCs and jobs show in
// the metrics, and a shutdown's reason is in the journal the next run reads.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/client_credentials.h"
#include "daemon/service/daemon_server.h"
#include "grpc_probe.pb.h"
#include "horovodd.grpc.pb.h"
#include "http_exchange.h"
#include "job_spec_support.h"

using namespace horovodd;

namespace {

constexpr int kDeadlineSeconds = 60;  // "did not hang", not an expectation

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(kDeadlineSeconds);
}

// One request and one response through gRPC's generic API, which is what a
// unary call and one round of a bidi stream both are on the wire. Returns
// the call's status; `response` is parsed from the reply.
grpc::Status CallOnce(const std::string& address, const std::string& method,
                      const google::protobuf::Message& request,
                      google::protobuf::Message& response) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  grpc::CompletionQueue queue;
  auto call = stub.PrepareCall(&context, method, &queue);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](int id) {
    REQUIRE(queue.Next(&tag, &ok));
    REQUIRE(tag == reinterpret_cast<void*>(id));
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  REQUIRE(step(1));
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  step(2);
  call->WritesDone(reinterpret_cast<void*>(3));
  step(3);
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(4));
  const bool got_reply = step(4);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  if (got_reply) {
    std::vector<grpc::Slice> slices;
    REQUIRE(in.Dump(&slices).ok());
    std::string reply;
    for (const auto& s : slices) reply.append(reinterpret_cast<const char*>(s.begin()), s.size());
    REQUIRE(response.ParseFromString(reply));
  }
  return status;
}

grpc::Status HealthCheck(const std::string& address, const std::string& service,
                         test::HealthCheckResponse& response) {
  test::HealthCheckRequest request;
  request.set_service(service);
  return CallOnce(address, "/grpc.health.v1.Health/Check", request, response);
}

std::unique_ptr<daemon::DaemonServer> StartDaemon(daemon::DaemonOptions options = {}) {
  options.listen_address = "127.0.0.1:0";
  auto started = daemon::DaemonServer::Start(options);
  INFO(started.status().message());
  REQUIRE(started.ok());
  return std::move(*started);
}

// Calls carry the daemon's admin token, as horovodrun's do.
std::unique_ptr<v1::JobService::Stub> Stub(const daemon::DaemonServer& server) {
  return v1::JobService::NewStub(cli::CreateDaemonChannel(
      server.address(), grpc::InsecureChannelCredentials(), server.admin_token()));
}

// `np` local workers running `argv`.
v1::JobSpec Spec(std::vector<std::string> argv, int np = 1) {
  return testing::LocalJobSpec(std::move(argv), np, np, 0);
}

grpc::Status Submit(v1::JobService::Stub& stub, const v1::JobSpec& spec, std::string* id) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitJobResponse response;
  grpc::Status st = stub.SubmitJob(&context, request, &response);
  *id = response.job_id();
  return st;
}

v1::JobStatus GetJob(v1::JobService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::GetJobRequest request;
  request.set_job_id(id);
  v1::JobStatus status;
  grpc::Status st = stub.GetJob(&context, request, &status);
  INFO(st.error_message());
  REQUIRE(st.ok());
  return status;
}

// Polls the job until `done(status)`; fails after the deadline.
v1::JobStatus WaitForJob(v1::JobService::Stub& stub, const std::string& id,
                         const std::function<bool(const v1::JobStatus&)>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(kDeadlineSeconds);
  while (true) {
    v1::JobStatus status = GetJob(stub, id);
    if (done(status)) return status;
    INFO(status.DebugString());
    REQUIRE(absl::Now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool HasLiveWorker(const v1::JobStatus& status) {
  for (const auto& w : status.workers()) {
    if (w.pid() > 0 && w.state() != v1::WORKER_FAILED && w.state() != v1::WORKER_SUCCEEDED) {
      return true;
    }
  }
  return false;
}

// Reads the job's events until the stream ends after JOB_ENDED: the job and
// its workers are gone. Returns that last event.
v1::JobEvent WatchToEnd(v1::JobService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::WatchJobRequest request;
  request.set_job_id(id);
  auto reader = stub.WatchJob(&context, request);
  v1::JobEvent event, last;
  while (reader->Read(&event)) last = event;
  grpc::Status st = reader->Finish();
  INFO(st.error_message());
  REQUIRE(st.ok());
  REQUIRE(last.kind() == v1::JobEvent::JOB_ENDED);
  return last;
}

void Cancel(v1::JobService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  v1::CancelJobRequest request;
  request.set_job_id(id);
  v1::CancelJobResponse response;
  REQUIRE(stub.CancelJob(&context, request, &response).ok());
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/hvdd-server-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST_CASE("the health checking service answers SERVING for the server and its services") {
  auto server = StartDaemon();
  for (const char* service : {"", "horovodd.v1.JobService", "horovodd.v1.WorkerService"}) {
    INFO("service '" << service << "'");
    test::HealthCheckResponse response;
    grpc::Status st = HealthCheck(server->address(), service, response);
    INFO(st.error_message());
    REQUIRE(st.ok());
    CHECK(response.status() == test::HealthCheckResponse::SERVING);
  }
  test::HealthCheckResponse response;
  CHECK(HealthCheck(server->address(), "no.such.Service", response).error_code() ==
        grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("server reflection lists the daemon's services") {
  auto server = StartDaemon();
  test::ServerReflectionRequest request;
  request.set_list_services("");
  test::ServerReflectionResponse response;
  grpc::Status st =
      CallOnce(server->address(), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
               request, response);
  INFO(st.error_message());
  REQUIRE(st.ok());
  REQUIRE(response.has_list_services_response());
  std::set<std::string> names;
  for (const auto& s : response.list_services_response().service()) names.insert(s.name());
  CHECK(names.count("horovodd.v1.JobService") == 1);
  CHECK(names.count("horovodd.v1.WorkerService") == 1);
}

TEST_CASE("max_jobs refuses one more unfinished job with RESOURCE_EXHAUSTED, then frees up") {
  daemon::DaemonOptions options;
  options.limits.max_jobs = 1;
  auto server = StartDaemon(options);
  auto stub = Stub(*server);
  std::string first;
  REQUIRE(Submit(*stub, Spec({"/bin/sleep", "300"}), &first).ok());

  std::string second;
  grpc::Status refused = Submit(*stub, Spec({"/bin/true"}), &second);
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(refused.error_message() ==
        "this horovodd runs at most 1 unfinished jobs at once (limits.max_jobs) and has 1; "
        "submit again when one has ended");

  // A cancelled job counts until its workers are gone (JOB_ENDED may come
  // first: the driver then still waits for their exit), and then frees up.
  Cancel(*stub, first);
  WatchToEnd(*stub, first);
  grpc::Status accepted = Submit(*stub, Spec({"/bin/true"}), &second);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (accepted.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    accepted = Submit(*stub, Spec({"/bin/true"}), &second);
  }
  INFO(accepted.error_message());
  CHECK(accepted.ok());
  CHECK(second != first);
}

TEST_CASE("max_workers_per_job refuses bigger jobs and caps elastic ones with no max_np") {
  daemon::DaemonOptions options;
  options.limits.max_workers_per_job = 2;
  auto server = StartDaemon(options);
  auto stub = Stub(*server);

  std::string id;
  grpc::Status too_many = Submit(*stub, Spec({"/bin/true"}, 3), &id);
  CHECK(too_many.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(too_many.error_message() ==
        "num_proc 3 is over this horovodd's limit of 2 workers per job "
        "(limits.max_workers_per_job)");
  v1::JobSpec wide = Spec({"/bin/true"});
  wide.set_max_np(8);
  grpc::Status too_wide = Submit(*stub, wide, &id);
  CHECK(too_wide.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(absl::StartsWith(too_wide.error_message(), "max_np 8 is over"));

  v1::JobSpec unlimited = Spec({"/bin/true"});
  unlimited.set_max_np(0);
  unlimited.set_elastic(true);
  REQUIRE(Submit(*stub, unlimited, &id).ok());
  CHECK(GetJob(*stub, id).max_np() == 2);
}

TEST_CASE("RPCs and jobs show in the metrics, served over HTTP on metrics_listen") {
  daemon::DaemonOptions options;
  options.metrics_listen = "127.0.0.1:0";
  auto server = StartDaemon(options);
  REQUIRE(absl::StartsWith(server->metrics_address(), "127.0.0.1:"));
  auto stub = Stub(*server);
  std::string id;
  REQUIRE(Submit(*stub, Spec({"/bin/true"}), &id).ok());
  CHECK(WatchToEnd(*stub, id).state() == v1::SUCCEEDED);

  const std::string page =
      horovodd::test::HttpExchange(server->metrics_address(), "GET /metrics HTTP/1.1\r\n\r\n");
  CHECK(absl::StartsWith(page, "HTTP/1.1 200 OK\r\n"));
  CHECK(absl::StrContains(
      page, "horovodd_rpc_requests_total{method=\"horovodd.v1.JobService/SubmitJob\"} 1\n"));
  CHECK(absl::StrContains(
      page, "horovodd_rpc_requests_total{method=\"horovodd.v1.JobService/WatchJob\"} 1\n"));
  CHECK(absl::StrContains(page, "horovodd_jobs{state=\"succeeded\"} 1\n"));
  CHECK(absl::StrContains(page, "horovodd_jobs{state=\"running\"} 0\n"));
}

TEST_CASE("a shutdown's reason is recorded, and the next run lists the job with it") {
  TempDir state;
  std::string id;
  {
    daemon::DaemonOptions options;
    options.state_dir = state.path() + "/records";  // created by the daemon
    auto server = StartDaemon(options);
    CHECK(server->recovered_jobs() == 0);
    auto stub = Stub(*server);
    REQUIRE(Submit(*stub, Spec({"/bin/sleep", "300"}), &id).ok());
    WaitForJob(*stub, id, HasLiveWorker);
    server->Shutdown("horovodd stopped (SIGTERM)");
  }
  daemon::DaemonOptions options;
  options.state_dir = state.path() + "/records";
  auto server = StartDaemon(options);
  CHECK(server->recovered_jobs() == 1);
  auto stub = Stub(*server);
  const v1::JobStatus status = GetJob(*stub, id);
  CHECK(status.state() == v1::CANCELLED);
  CHECK(status.reason() == "horovodd stopped (SIGTERM)");
  CHECK(absl::StrContains(server->metrics().Render(), "horovodd_jobs{state=\"cancelled\"} 1\n"));
  // Numbering goes on after the recovered job.
  std::string next;
  REQUIRE(Submit(*stub, Spec({"/bin/true"}), &next).ok());
  CHECK(next != id);
}

TEST_CASE("a state dir that cannot be created is an error naming it") {
  TempDir state;
  const std::string file = state.path() + "/not-a-dir";
  std::ofstream(file) << "x";
  daemon::DaemonOptions options;
  options.listen_address = "127.0.0.1:0";
  options.state_dir = file + "/records";
  auto started = daemon::DaemonServer::Start(options);
  REQUIRE_FALSE(started.ok());
  CHECK(absl::StrContains(started.status().message(), file + "/records"));
}
