// The daemon's JobService over real gRPC (an in-process DaemonServer on
// 127.0.0.1:0): bad requests get the canonical code and a message naming the
// problem, and change nothing.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "cli/client_credentials.h"
#include "daemon/service/daemon_server.h"
#include "horovodd.grpc.pb.h"
#include "job_spec_support.h"
#include "served_daemon.h"

using namespace horovodd;

namespace {

// A spec the daemon accepts: one local worker running `argv`.
v1::JobSpec ValidSpec(std::vector<std::string> argv) {
  return testing::OneLocalWorkerSpec(std::move(argv));
}

grpc::Status Submit(testing::ServedDaemon& d, const v1::JobSpec& spec,
                    std::string* job_id = nullptr) {
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitJobResponse response;
  grpc::Status st = d.stub->SubmitJob(&context, request, &response);
  if (job_id != nullptr) *job_id = response.job_id();
  return st;
}

int JobCount(testing::ServedDaemon& d) {
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::ListJobsResponse response;
  REQUIRE(d.stub->ListJobs(&context, v1::ListJobsRequest(), &response).ok());
  return response.jobs_size();
}

// Reads the whole watch stream; returns its status and the last event.
grpc::Status WatchToEnd(testing::ServedDaemon& d, const std::string& job_id, v1::JobEvent* last) {
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  auto reader = d.stub->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) *last = event;
  return reader->Finish();
}

#define CHECK_STATUS(call, code_, text)                     \
  do {                                                      \
    grpc::Status st_ = (call);                              \
    CHECK(st_.error_code() == grpc::StatusCode::code_);     \
    CHECK_THAT(st_.error_message(), Catch::Contains(text)); \
  } while (false)

}  // namespace

TEST_CASE("a spec with no command is refused with INVALID_ARGUMENT and no job is made") {
  testing::ServedDaemon d;
  CHECK_STATUS(Submit(d, ValidSpec({})), INVALID_ARGUMENT, "argv is empty");
  CHECK_STATUS(Submit(d, ValidSpec({""})), INVALID_ARGUMENT, "argv is empty");
  CHECK(JobCount(d) == 0);
}

TEST_CASE("min_np above max_np is refused naming both values") {
  testing::ServedDaemon d;
  v1::JobSpec spec = ValidSpec({"/bin/true"});
  spec.set_min_np(3);
  spec.set_max_np(2);
  spec.set_num_proc(3);
  CHECK_STATUS(Submit(d, spec), INVALID_ARGUMENT, "min_np (3) is greater than max_np (2)");
  CHECK(JobCount(d) == 0);
}

TEST_CASE("an unknown job is NOT_FOUND for every call that names one") {
  testing::ServedDaemon d;
  const std::string missing = "job-404";
  const std::string message = "no job 'job-404'";
  {
    grpc::ClientContext context;
    testing::SetCallDeadline(context);
    v1::GetJobRequest request;
    request.set_job_id(missing);
    v1::JobStatus response;
    CHECK_STATUS(d.stub->GetJob(&context, request, &response), NOT_FOUND, message);
  }
  {
    grpc::ClientContext context;
    testing::SetCallDeadline(context);
    v1::CancelJobRequest request;
    request.set_job_id(missing);
    v1::CancelJobResponse response;
    CHECK_STATUS(d.stub->CancelJob(&context, request, &response), NOT_FOUND, message);
  }
  {
    v1::JobEvent last;
    CHECK_STATUS(WatchToEnd(d, missing, &last), NOT_FOUND, message);
  }
  for (bool drain : {true, false}) {
    grpc::ClientContext context;
    testing::SetCallDeadline(context);
    v1::DrainHostRequest request;
    request.set_host("localhost");
    request.set_job_id(missing);
    v1::DrainHostResponse response;
    CHECK_STATUS(drain ? d.stub->DrainHost(&context, request, &response)
                       : d.stub->UndrainHost(&context, request, &response),
                 NOT_FOUND, message);
  }
  {
    grpc::ClientContext context;
    testing::SetCallDeadline(context);
    v1::GetWorkerOutputRequest request;
    request.set_job_id(missing);
    v1::GetWorkerOutputResponse response;
    CHECK_STATUS(d.stub->GetWorkerOutput(&context, request, &response), NOT_FOUND, message);
  }
  CHECK(JobCount(d) == 0);
}

TEST_CASE("draining without a host name is INVALID_ARGUMENT") {
  testing::ServedDaemon d;
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::DrainHostRequest request;
  v1::DrainHostResponse response;
  CHECK_STATUS(d.stub->DrainHost(&context, request, &response), INVALID_ARGUMENT, "no host given");
}

TEST_CASE("a negative rank is INVALID_ARGUMENT; a cancelled job's watch ends with its end") {
  testing::ServedDaemon d;
  std::string job_id;
  REQUIRE(Submit(d, ValidSpec({"/bin/sleep", "600"}), &job_id).ok());
  CHECK(job_id == "job-1");
  {
    grpc::ClientContext context;
    testing::SetCallDeadline(context);
    v1::GetWorkerOutputRequest request;
    request.set_job_id(job_id);
    request.set_rank(-1);
    v1::GetWorkerOutputResponse response;
    CHECK_STATUS(d.stub->GetWorkerOutput(&context, request, &response), INVALID_ARGUMENT,
                 "rank must be >= 0, got -1");
  }
  {
    grpc::ClientContext context;
    testing::SetCallDeadline(context);
    v1::CancelJobRequest request;
    request.set_job_id(job_id);
    request.set_reason("test is done");
    v1::CancelJobResponse response;
    REQUIRE(d.stub->CancelJob(&context, request, &response).ok());
  }
  v1::JobEvent last;
  REQUIRE(WatchToEnd(d, job_id, &last).ok());
  CHECK(last.kind() == v1::JobEvent::JOB_ENDED);
  CHECK(last.state() == v1::CANCELLED);
  CHECK(last.message() == "test is done");

  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::JobStatus status;
  REQUIRE(d.stub->GetJob(&context, request, &status).ok());
  CHECK(status.state() == v1::CANCELLED);
  CHECK(status.reason() == "test is done");
  CHECK(status.ended_unix() >= status.created_unix());
}

TEST_CASE(
    "StopDaemon: refused by an embedded daemon; a standalone one hands the stop to its main") {
  {
    testing::ServedDaemon embedded;  // stoppable_over_rpc unset, as horovodrun's
    grpc::ClientContext context;
    testing::SetCallDeadline(context);
    v1::StopDaemonResponse response;
    CHECK_STATUS(embedded.stub->StopDaemon(&context, v1::StopDaemonRequest(), &response),
                 FAILED_PRECONDITION, "runs inside horovodrun");
  }
  daemon::DaemonOptions options;
  options.listen_address = "127.0.0.1:0";
  options.stoppable_over_rpc = true;
  auto started = daemon::DaemonServer::Start(options);
  REQUIRE(started.ok());
  auto stub = v1::JobService::NewStub(cli::CreateDaemonChannel(
      (*started)->address(), grpc::InsecureChannelCredentials(), (*started)->admin_token()));
  grpc::ClientContext context;
  testing::SetCallDeadline(context);
  v1::StopDaemonRequest request;
  request.set_stop_jobs(true);
  request.set_reason("maintenance");
  v1::StopDaemonResponse response;
  REQUIRE(stub->StopDaemon(&context, request, &response).ok());
  CHECK(response.running_jobs() == 0);
  CHECK_FALSE(response.jobs_left_running());
  const daemon::StopRequest stop = (*started)->AwaitStop();  // returns at once: it was asked
  CHECK(stop.stop_jobs);
  CHECK(stop.reason == "maintenance");
  (*started)->ShutdownStoppingJobs(stop.reason);
}
