// An in-process DaemonServer (127.0.0.1:0, real gRPC) refusing every call
// without the right credentials: no token, a wrong or malformed one, the
// viewer token on admin calls, a worker token on JobService, and one job's
// worker token on another job's rendezvous, keys and streams. Each refusal
// is UNAUTHENTICATED or PERMISSION_DENIED and changes nothing.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/time/clock.h"
#include "cli/client_credentials.h"
#include "daemon/service/daemon_server.h"
#include "horovodd.grpc.pb.h"
#include "job_spec_support.h"

using namespace horovodd;
namespace fs = std::filesystem;

namespace {

constexpr int kDeadlineSeconds = 60;  // "did not hang", not an expectation
constexpr char kViewerToken[] = "viewer-token-for-tests";

struct SecureDaemon {
  fs::path dir;
  std::unique_ptr<daemon::DaemonServer> server;

  explicit SecureDaemon(
      daemon::ReadOnlyAccess open_read_only = daemon::ReadOnlyAccess::kTokenRequired) {
    std::string pattern = (fs::temp_directory_path() / "hvdd-authd-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    const fs::path viewer = dir / "viewer.token";
    std::ofstream(viewer) << kViewerToken << "\n";
    REQUIRE(chmod(viewer.c_str(), 0600) == 0);
    daemon::DaemonOptions options;
    options.auth.viewer_token_file = viewer.string();
    options.auth.open_read_only = open_read_only;
    auto started = daemon::DaemonServer::Start(options);
    INFO(started.status().message());
    REQUIRE(started.ok());
    server = std::move(*started);
  }
  ~SecureDaemon() {
    server.reset();
    fs::remove_all(dir);
  }

  // A JobService stub whose calls carry `token` ("" for none).
  std::unique_ptr<v1::JobService::Stub> Jobs(const std::string& token) const {
    return v1::JobService::NewStub(
        cli::CreateDaemonChannel(server->address(), grpc::InsecureChannelCredentials(), token));
  }
  std::unique_ptr<v1::WorkerService::Stub> Workers() const {
    return v1::WorkerService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
  // The worker identity of job `id` with `token`.
  static v1::WorkerIdentity Who(const std::string& id, const std::string& token) {
    v1::WorkerIdentity who;
    who.set_job_id(id);
    who.set_worker_id(1);
    who.set_token(token);
    return who;
  }
  std::string WorkerToken(const std::string& id) const {
    auto driver = server->jobs().Find(id);
    REQUIRE(driver != nullptr);
    return driver->worker_token();
  }
};

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(kDeadlineSeconds));
}

v1::JobSpec Spec(std::vector<std::string> argv) {
  return testing::OneLocalWorkerSpec(std::move(argv));
}

grpc::Status Submit(v1::JobService::Stub& stub, const v1::JobSpec& spec, std::string* id) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitJobResponse response;
  grpc::Status st = stub.SubmitJob(&context, request, &response);
  if (id != nullptr) *id = response.job_id();
  return st;
}

grpc::Status List(v1::JobService::Stub& stub, int* count = nullptr) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::ListJobsResponse response;
  grpc::Status st = stub.ListJobs(&context, v1::ListJobsRequest(), &response);
  if (count != nullptr) *count = response.jobs_size();
  return st;
}

grpc::Status Cancel(v1::JobService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::CancelJobRequest request;
  request.set_job_id(id);
  v1::CancelJobResponse response;
  return stub.CancelJob(&context, request, &response);
}

grpc::Status Drain(v1::JobService::Stub& stub) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::DrainHostRequest request;
  request.set_host("localhost");
  v1::DrainHostResponse response;
  return stub.DrainHost(&context, request, &response);
}

grpc::Status KvSet(v1::WorkerService::Stub& stub, const v1::WorkerIdentity& who) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::KvSetRequest request;
  *request.mutable_who() = who;
  request.set_generation(1);
  request.set_key("stolen");
  request.set_value("x");
  v1::KvSetResponse response;
  return stub.KvSet(&context, request, &response);
}

grpc::Status KvGet(v1::WorkerService::Stub& stub, const v1::WorkerIdentity& who) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::KvGetRequest request;
  *request.mutable_who() = who;
  request.set_generation(1);
  request.add_keys("rank0");
  request.set_timeout_seconds(0.1);
  v1::KvGetResponse response;
  return stub.KvGet(&context, request, &response);
}

grpc::Status Commit(v1::WorkerService::Stub& stub, const v1::WorkerIdentity& who) {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::CommitReport request;
  *request.mutable_who() = who;
  request.set_generation(1);
  request.set_commit(5);
  v1::Empty response;
  return stub.ReportCommit(&context, request, &response);
}

grpc::Status AttachHello(v1::WorkerService::Stub& stub, const v1::WorkerIdentity& who) {
  grpc::ClientContext context;
  SetDeadline(context);
  auto stream = stub.Attach(&context);
  v1::WorkerMessage hello;
  *hello.mutable_hello() = who;
  stream->Write(hello);
  stream->WritesDone();
  v1::DaemonMessage ignored;
  while (stream->Read(&ignored)) {
  }
  return stream->Finish();
}

}  // namespace

TEST_CASE("JobService without the right token: UNAUTHENTICATED, nothing changes") {
  SecureDaemon d;
  auto admin = d.Jobs(d.server->admin_token());
  for (const std::string token : {"", "not-the-token"}) {
    auto stub = d.Jobs(token);
    grpc::Status listed = List(*stub);
    CHECK(listed.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK_THAT(listed.error_message(), Catch::Contains("--token-file"));
    CHECK(Submit(*stub, Spec({"/bin/true"}), nullptr).error_code() ==
          grpc::StatusCode::UNAUTHENTICATED);
    CHECK(Drain(*stub).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  // A header that is not "Bearer TOKEN".
  auto stub = v1::JobService::NewStub(
      grpc::CreateChannel(d.server->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  SetDeadline(context);
  context.AddMetadata("authorization", "Basic " + d.server->admin_token());
  v1::ListJobsResponse response;
  grpc::Status malformed = stub->ListJobs(&context, v1::ListJobsRequest(), &response);
  CHECK(malformed.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_THAT(malformed.error_message(), Catch::Contains("Bearer"));

  int jobs = -1;
  REQUIRE(List(*admin, &jobs).ok());
  CHECK(jobs == 0);
}

TEST_CASE("the viewer token reads but may not submit, cancel or drain") {
  SecureDaemon d;
  auto admin = d.Jobs(d.server->admin_token());
  auto viewer = d.Jobs(kViewerToken);
  std::string id;
  REQUIRE(Submit(*admin, Spec({"/bin/sleep", "300"}), &id).ok());
  int jobs = 0;
  REQUIRE(List(*viewer, &jobs).ok());
  CHECK(jobs == 1);

  grpc::Status submitted = Submit(*viewer, Spec({"/bin/true"}), nullptr);
  CHECK(submitted.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK_THAT(submitted.error_message(), Catch::Contains("SubmitJob needs the admin token"));
  CHECK(Cancel(*viewer, id).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(Drain(*viewer).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  REQUIRE(List(*admin, &jobs).ok());
  CHECK(jobs == 1);
  CHECK_FALSE(d.server->jobs().Find(id)->Ended());
  CHECK(Cancel(*admin, id).ok());
}

TEST_CASE("open_read_only: loopback opens reads on loopback, never admin calls") {
  SecureDaemon d(daemon::ReadOnlyAccess::kLoopback);
  auto anonymous = d.Jobs("");
  CHECK(List(*anonymous).ok());
  CHECK(Submit(*anonymous, Spec({"/bin/true"}), nullptr).error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
}

TEST_CASE("a worker token opens its own job only, and no JobService call") {
  SecureDaemon d;
  auto admin = d.Jobs(d.server->admin_token());
  std::string a, b;
  REQUIRE(Submit(*admin, Spec({"/bin/sleep", "300"}), &a).ok());
  REQUIRE(Submit(*admin, Spec({"/bin/sleep", "300"}), &b).ok());
  const std::string token_a = d.WorkerToken(a);
  const std::string token_b = d.WorkerToken(b);
  REQUIRE(token_a.size() == 64);
  REQUIRE(token_a != token_b);
  auto workers = d.Workers();

  // Job A's token names job B: refused before B's driver sees anything.
  const v1::WorkerIdentity a_as_b = SecureDaemon::Who(b, token_a);
  for (const grpc::Status& st : {KvSet(*workers, a_as_b), KvGet(*workers, a_as_b),
                                 Commit(*workers, a_as_b), AttachHello(*workers, a_as_b)}) {
    CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK_THAT(st.error_message(), Catch::Contains("belongs to another job"));
  }
  // No token, or one no job has.
  for (const std::string token : {"", "0123456789abcdef"}) {
    const v1::WorkerIdentity who = SecureDaemon::Who(b, token);
    CHECK(KvGet(*workers, who).error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(AttachHello(*workers, who).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  // Its own job's keys: past the token check (the generation is stale, so
  // the store itself answers).
  const grpc::Status own = KvSet(*workers, SecureDaemon::Who(b, token_b));
  CHECK(own.error_code() != grpc::StatusCode::PERMISSION_DENIED);
  CHECK(own.error_code() != grpc::StatusCode::UNAUTHENTICATED);

  // A worker token is no admin token.
  auto as_worker = d.Jobs(token_a);
  grpc::Status submitted = Submit(*as_worker, Spec({"/bin/true"}), nullptr);
  CHECK(submitted.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK_THAT(submitted.error_message(), Catch::Contains("worker token cannot call JobService"));
  CHECK(List(*as_worker).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(Cancel(*as_worker, b).error_code() == grpc::StatusCode::PERMISSION_DENIED);

  // And none of it shows in what operators see.
  const std::string status_a = d.server->jobs().Status(a)->DebugString();
  CHECK(status_a.find(token_a) == std::string::npos);
  CHECK(Cancel(*admin, a).ok());
  CHECK(Cancel(*admin, b).ok());
}

TEST_CASE("workers get their job's token in the environment, not the admin's") {
  // The daemon's own environment must not carry admin credentials to workers.
  setenv("HOROVODD_TOKEN", "admin-secret-of-the-daemon-user", 1);
  SecureDaemon d;
  auto admin = d.Jobs(d.server->admin_token());
  std::string id;
  REQUIRE(Submit(*admin,
                 Spec({"/bin/sh", "-c",
                       "test ${#HOROVODD_WORKER_TOKEN} -eq 64 && test -z \"$HOROVODD_TOKEN\""}),
                 &id)
              .ok());
  auto driver = d.server->jobs().Find(id);
  REQUIRE(driver != nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(kDeadlineSeconds);
  while (!driver->Ended() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  unsetenv("HOROVODD_TOKEN");
  CHECK(driver->Status().state() == v1::SUCCEEDED);
}
