// SubmitJob with a client request id (issue 36: a client that retries, or
// follows a new leader, after losing the answer): the same id answers the
// job it made, whether that job runs, ended, raced another submission with
// the id, or was made by an earlier run of the daemon (the journal keeps
// the id); an id reused for another spec, or malformed, is refused. Through
// an in-process DaemonServer on 127.0.0.1:0 over real gRPC, so the request
// passes the daemon's validation and limits as a client's does.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "cli/client_credentials.h"
#include "daemon/service/daemon_server.h"
#include "horovodd.grpc.pb.h"
#include "job_spec_support.h"
#include "journal_test_support.h"
#include "served_daemon.h"

using namespace horovodd;

namespace {

using testing::kCallDeadlineSeconds;
constexpr char kId[] = "3f2a9c0e5b7d4e1f8a6c2b9d0e4f7a1c";

v1::JobSpec Spec(std::vector<std::string> argv) {
  return testing::OneLocalWorkerSpec(std::move(argv));
}

grpc::Status Submit(testing::ServedDaemon& d, const v1::JobSpec& spec,
                    const std::string& request_id, std::string* job_id = nullptr) {
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  request.set_client_request_id(request_id);
  v1::SubmitJobResponse response;
  grpc::Status status = d.stub->SubmitJob(&context, request, &response);
  if (job_id != nullptr) *job_id = response.job_id();
  return status;
}

std::string SubmitOk(testing::ServedDaemon& d, const v1::JobSpec& spec,
                     const std::string& request_id) {
  std::string job_id;
  const grpc::Status status = Submit(d, spec, request_id, &job_id);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return job_id;
}

std::vector<v1::JobStatus> Jobs(testing::ServedDaemon& d) {
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::ListJobsResponse response;
  REQUIRE(d.stub->ListJobs(&context, v1::ListJobsRequest(), &response).ok());
  return {response.jobs().begin(), response.jobs().end()};
}

v1::JobStatus Status(testing::ServedDaemon& d, const std::string& job_id) {
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::JobStatus status;
  REQUIRE(d.stub->GetJob(&context, request, &status).ok());
  return status;
}

void AwaitEnded(testing::ServedDaemon& d, const std::string& job_id) {
  const absl::Time deadline = absl::Now() + absl::Seconds(kCallDeadlineSeconds);
  while (absl::Now() < deadline) {
    const v1::JobState state = Status(d, job_id).state();
    if (state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
  FAIL("job " << job_id << " did not end");
}

void Cancel(testing::ServedDaemon& d, const std::string& job_id) {
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::CancelJobResponse response;
  REQUIRE(d.stub->CancelJob(&context, request, &response).ok());
}

}  // namespace

TEST_CASE("a submission repeated with its client request id answers the job it made") {
  testing::ServedDaemon d;
  const v1::JobSpec spec = Spec({"/bin/sleep", "30"});
  const std::string job_id = SubmitOk(d, spec, kId);
  CHECK(SubmitOk(d, spec, kId) == job_id);
  CHECK(SubmitOk(d, spec, kId) == job_id);
  REQUIRE(Jobs(d).size() == 1);
  CHECK(Status(d, job_id).client_request_id() == kId);

  // Once it ended, too.
  Cancel(d, job_id);
  AwaitEnded(d, job_id);
  CHECK(SubmitOk(d, spec, kId) == job_id);
  CHECK(Jobs(d).size() == 1);

  // Another id, or none, is another job.
  const std::string other = SubmitOk(d, Spec({"/bin/true"}), "another-request-id-0001");
  CHECK(other != job_id);
  const std::string first_plain = SubmitOk(d, Spec({"/bin/true"}), "");
  const std::string second_plain = SubmitOk(d, Spec({"/bin/true"}), "");
  CHECK(first_plain != second_plain);
  CHECK(Jobs(d).size() == 4);
  CHECK(Status(d, first_plain).client_request_id().empty());
}

TEST_CASE("a client request id reused for another spec is ALREADY_EXISTS and makes no job") {
  testing::ServedDaemon d;
  const std::string job_id = SubmitOk(d, Spec({"/bin/sleep", "30"}), kId);
  grpc::Status status = Submit(d, Spec({"/bin/sleep", "31"}), kId);
  CHECK(status.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK_THAT(status.error_message(),
             Catch::Contains(kId) && Catch::Contains(job_id) && Catch::Contains("spec differs"));
  CHECK(Jobs(d).size() == 1);
  Cancel(d, job_id);
}

TEST_CASE("a malformed client request id is INVALID_ARGUMENT naming the field and makes no job") {
  testing::ServedDaemon d;
  const v1::JobSpec spec = Spec({"/bin/true"});
  struct Case {
    std::string id;
    std::string says;
  };
  for (const Case& c : {Case{"short", "is 5 characters; it must be 16 to 128"},
                        Case{std::string(129, 'a'), "is 129 characters"},
                        Case{"has a space in it, 1234", "other than letters, digits"},
                        Case{"slash/is/not/allowed/here", "other than letters, digits"},
                        Case{std::string("nul\0byte-in-the-id", 18), "other than letters"}}) {
    INFO(c.id);
    const grpc::Status status = Submit(d, spec, c.id);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(),
               Catch::StartsWith("client_request_id ") && Catch::Contains(c.says));
  }
  CHECK(Jobs(d).empty());
  // The bounds themselves are ids.
  SubmitOk(d, spec, std::string(16, 'x'));
  SubmitOk(d, spec, std::string(128, 'y'));
  SubmitOk(d, spec, "Aa0-_.Aa0-_.Aa0-_.");
  CHECK(Jobs(d).size() == 3);
}

TEST_CASE("submissions racing with one client request id make one job") {
  testing::ServedDaemon d;
  const v1::JobSpec spec = Spec({"/bin/sleep", "30"});
  constexpr int kClients = 8;
  std::vector<std::string> answers(kClients);
  std::vector<grpc::Status> statuses(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] { statuses[i] = Submit(d, spec, kId, &answers[i]); });
  }
  for (auto& client : clients) client.join();
  std::set<std::string> ids;
  for (int i = 0; i < kClients; ++i) {
    INFO(statuses[i].error_message());
    CHECK(statuses[i].ok());
    ids.insert(answers[i]);
  }
  REQUIRE(ids.size() == 1);
  CHECK(Jobs(d).size() == 1);
  Cancel(d, *ids.begin());
}

TEST_CASE("limits.max_jobs does not refuse a repeated submission: it makes no job") {
  daemon::DaemonOptions options;
  options.limits.max_jobs = 1;
  // Elastic without max_np: the daemon caps it (limits.max_workers_per_job),
  // and the repeated spec is capped alike before the two are compared.
  v1::JobSpec spec = testing::LocalJobSpec({"/bin/sleep", "30"}, 1, 1, 0);
  spec.set_elastic(true);
  testing::ServedDaemon d(options);
  const std::string job_id = SubmitOk(d, spec, kId);
  CHECK(SubmitOk(d, spec, kId) == job_id);
  const grpc::Status refused = Submit(d, spec, "a-new-job-over-the-limit");
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(Jobs(d).size() == 1);
  Cancel(d, job_id);
}

TEST_CASE("a daemon restarted on its journal still knows a submission's client request id") {
  horovodd::daemon::testing::TempDir state_dir;
  daemon::DaemonOptions options;
  options.state_dir = state_dir.path();
  const v1::JobSpec spec = Spec({"/bin/true"});
  std::string job_id;
  {
    testing::ServedDaemon d(options);
    job_id = SubmitOk(d, spec, kId);
    AwaitEnded(d, job_id);
  }
  testing::ServedDaemon d(options);
  CHECK(SubmitOk(d, spec, kId) == job_id);
  REQUIRE(Jobs(d).size() == 1);
  CHECK(Status(d, job_id).client_request_id() == kId);
  // Its spec is the journal's copy: another one is still refused.
  CHECK(Submit(d, Spec({"/bin/false"}), kId).error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(SubmitOk(d, spec, "after-the-restart-0001") != job_id);
}
