// Archived jobs (recorded by an earlier run of the daemon) through the job
// service, as horovodctl sees them: listed, read and watched like live jobs,
// never changed; new jobs are numbered after them. And the whole loop: a job
// a real driver ran, recorded by the journal, recovered after a "restart".
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/job/job_manager.h"
#include "daemon/journal/journal.h"
#include "daemon/launch/local_launcher.h"
#include "daemon/rpc/job_service.h"
#include "horovodd.grpc.pb.h"
#include "job_spec_support.h"
#include "journal_test_support.h"

namespace horovodd::daemon {
namespace {

using testing::EndEvent;
using testing::MakeEvent;
using testing::TempDir;

// "Did not hang" deadline: generous, the test machine is small and loaded.
constexpr absl::Duration kPatience = absl::Seconds(90);

// The job service over real gRPC on a loopback port, with a local launcher.
// Members are destroyed in reverse: the server stops, then the jobs end, then
// the launcher goes.
class TestDaemon {
 public:
  explicit TestDaemon(JobObserver* observer = nullptr) {
    auto launcher = LocalLauncher::Create();
    REQUIRE(launcher.ok());
    launcher_ = std::move(*launcher);
    router_ = std::make_unique<HostRouter>(launcher_.get(), nullptr);
    jobs_ = std::make_unique<JobManager>(router_.get(), observer);
    service_ = std::make_unique<JobServiceImpl>(jobs_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    REQUIRE(port > 0);
    const std::string address = absl::StrCat("127.0.0.1:", port);
    jobs_->set_worker_address(address);  // plain commands never dial it
    stub_ =
        v1::JobService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  ~TestDaemon() { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2)); }

  JobManager& jobs() { return *jobs_; }
  v1::JobService::Stub& stub() { return *stub_; }

  std::string Submit(const v1::JobSpec& spec) {
    grpc::ClientContext context;
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    v1::SubmitJobResponse response;
    const grpc::Status status = stub_->SubmitJob(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    return response.job_id();
  }

  grpc::Status Get(const std::string& job_id, v1::JobStatus* out) {
    grpc::ClientContext context;
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    return stub_->GetJob(&context, request, out);
  }

  std::vector<std::string> ListedIds() {
    grpc::ClientContext context;
    v1::ListJobsResponse response;
    REQUIRE(stub_->ListJobs(&context, v1::ListJobsRequest(), &response).ok());
    std::vector<std::string> ids;
    for (const auto& job : response.jobs()) ids.push_back(job.job_id());
    return ids;
  }

  // Every event from `from_seq` until the stream ends.
  std::vector<v1::JobEvent> Watch(const std::string& job_id, uint64_t from_seq = 0) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    request.set_from_seq(from_seq);
    auto reader = stub_->WatchJob(&context, request);
    std::vector<v1::JobEvent> events;
    v1::JobEvent event;
    while (reader->Read(&event)) events.push_back(event);
    const grpc::Status status = reader->Finish();
    INFO(status.error_message());
    REQUIRE(status.ok());
    return events;
  }

  grpc::Status Cancel(const std::string& job_id) {
    grpc::ClientContext context;
    v1::CancelJobRequest request;
    request.set_job_id(job_id);
    v1::CancelJobResponse response;
    return stub_->CancelJob(&context, request, &response);
  }

  // Waits until the job's workers are gone and its log is closed.
  void AwaitEnded(const std::string& job_id) {
    auto driver = jobs_->Find(job_id);
    REQUIRE(driver != nullptr);
    const absl::Time deadline = absl::Now() + kPatience;
    while (!driver->Ended() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    REQUIRE(driver->Ended());
  }

 private:
  std::unique_ptr<LocalLauncher> launcher_;
  std::unique_ptr<HostRouter> router_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<JobServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

v1::JobSpec LocalSpec(std::vector<std::string> argv) {
  return horovodd::testing::OneLocalWorkerSpec(std::move(argv));
}

ArchivedJob Archived(const std::string& id, v1::JobState state, const std::string& reason,
                     std::vector<v1::JobEvent> events) {
  ArchivedJob job;
  job.status.set_job_id(id);
  *job.status.mutable_spec() = LocalSpec({"train"});
  job.status.set_state(state);
  job.status.set_reason(reason);
  job.status.set_generation(2);
  job.events = std::move(events);
  return job;
}

std::vector<ArchivedJob> EarlierRun() {
  std::vector<ArchivedJob> jobs;
  jobs.push_back(Archived(
      "job-7", v1::SUCCEEDED, "all workers finished",
      {MakeEvent(1, v1::JobEvent::INFO, 100), MakeEvent(2, v1::JobEvent::MEMBERSHIP, 101, 2),
       EndEvent(5, v1::SUCCEEDED, 102, 2, "all workers finished")}));
  jobs.push_back(Archived("job-3", v1::FAILED, Journal::kStoppedReason,
                          {MakeEvent(1, v1::JobEvent::INFO, 50),
                           EndEvent(2, v1::FAILED, 60, 0, Journal::kStoppedReason)}));
  return jobs;
}

std::vector<uint64_t> Seqs(const std::vector<v1::JobEvent>& events) {
  std::vector<uint64_t> seqs;
  for (const auto& e : events) seqs.push_back(e.seq());
  return seqs;
}

TEST_CASE("Archived jobs are listed, read and watched, and cannot be changed") {
  TestDaemon daemon;
  daemon.jobs().AddArchived(EarlierRun());

  CHECK(daemon.ListedIds() == std::vector<std::string>{"job-3", "job-7"});
  v1::JobStatus status;
  REQUIRE(daemon.Get("job-7", &status).ok());
  CHECK(status.state() == v1::SUCCEEDED);
  CHECK(status.reason() == "all workers finished");
  CHECK(status.generation() == 2);

  // The recorded events, then the stream ends.
  const auto events = daemon.Watch("job-7");
  CHECK(Seqs(events) == std::vector<uint64_t>{1, 2, 5});
  CHECK(events.back().kind() == v1::JobEvent::JOB_ENDED);
  CHECK(Seqs(daemon.Watch("job-7", 2)) == std::vector<uint64_t>{2, 5});

  const grpc::Status cancel = daemon.Cancel("job-7");
  CHECK(cancel.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(cancel.error_message() == "job job-7 already ended (SUCCEEDED)");

  {
    grpc::ClientContext context;
    v1::DrainHostRequest request;
    request.set_host("node-a");
    request.set_job_id("job-3");
    v1::DrainHostResponse response;
    const grpc::Status drain = daemon.stub().DrainHost(&context, request, &response);
    CHECK(drain.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(drain.error_message() == "job job-3 already ended (FAILED)");
  }
  {
    // Draining everywhere leaves the archived jobs alone.
    grpc::ClientContext context;
    v1::DrainHostRequest request;
    request.set_host("node-a");
    v1::DrainHostResponse response;
    REQUIRE(daemon.stub().DrainHost(&context, request, &response).ok());
    CHECK(response.job_ids().empty());
  }
  {
    grpc::ClientContext context;
    v1::GetWorkerOutputRequest request;
    request.set_job_id("job-3");
    v1::GetWorkerOutputResponse response;
    const grpc::Status output = daemon.stub().GetWorkerOutput(&context, request, &response);
    CHECK(output.error_code() == grpc::StatusCode::NOT_FOUND);
    CHECK_THAT(output.error_message(), Catch::Contains("output of job-3") &&
                                           Catch::Contains("not kept across a daemon restart"));
  }
  const grpc::Status unknown = daemon.Get("job-99", &status);
  CHECK(unknown.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(unknown.error_message() == "no job 'job-99'");
}

TEST_CASE("New jobs are numbered after the archived ones; an ended job cannot be cancelled") {
  TestDaemon daemon;
  daemon.jobs().AddArchived(EarlierRun());

  const std::string id = daemon.Submit(LocalSpec({"/bin/true"}));
  CHECK(id == "job-8");
  daemon.AwaitEnded(id);
  v1::JobStatus status;
  REQUIRE(daemon.Get(id, &status).ok());
  CHECK(status.state() == v1::SUCCEEDED);
  const grpc::Status cancel = daemon.Cancel(id);
  CHECK(cancel.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(cancel.error_message() == "job job-8 already ended (SUCCEEDED)");
  CHECK(daemon.ListedIds() == std::vector<std::string>{"job-3", "job-7", "job-8"});
}

TEST_CASE("Past the cap on ended jobs, the oldest are forgotten, so memory stays bounded") {
  TestDaemon daemon;
  std::vector<ArchivedJob> earlier(JobManager::kMaxEndedJobs);
  for (size_t i = 0; i < earlier.size(); ++i) {
    earlier[i].status.set_job_id(absl::StrCat("job-", i + 1));
    earlier[i].status.set_state(v1::SUCCEEDED);
  }
  daemon.jobs().AddArchived(std::move(earlier));
  // At the cap: nothing is forgotten yet.
  const std::string first = daemon.Submit(LocalSpec({"/bin/true"}));
  daemon.AwaitEnded(first);
  v1::JobStatus status;
  CHECK(daemon.Get("job-1", &status).ok());
  // One more ended job than the cap: the oldest (job-1) goes, the rest stay.
  const std::string second = daemon.Submit(LocalSpec({"/bin/true"}));
  daemon.AwaitEnded(second);
  CHECK(daemon.Get("job-1", &status).error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(daemon.Get("job-2", &status).ok());
  CHECK(daemon.Get(first, &status).ok());
  CHECK(daemon.ListedIds().size() == JobManager::kMaxEndedJobs + 1);  // + the newest
}

TEST_CASE("A job the daemon ran is recovered from its journal after a restart") {
  TempDir state_dir;
  v1::JobStatus live;
  std::vector<uint64_t> live_seqs;  // of the events that are not worker output
  {
    auto journal = Journal::Open(state_dir.path());
    REQUIRE(journal.ok());
    TestDaemon daemon(journal->get());
    const std::string id = daemon.Submit(LocalSpec({"/bin/sh", "-c", "echo hello; echo bye"}));
    REQUIRE(id == "job-1");
    daemon.AwaitEnded(id);
    REQUIRE(daemon.Get(id, &live).ok());
    bool saw_output = false;
    for (const auto& event : daemon.Watch(id)) {
      if (event.kind() == v1::JobEvent::OUTPUT) {
        saw_output = true;
      } else {
        live_seqs.push_back(event.seq());
      }
    }
    CHECK(saw_output);
  }
  REQUIRE(live.state() == v1::SUCCEEDED);

  auto journal = Journal::Open(state_dir.path());
  REQUIRE(journal.ok());
  auto recovered = (*journal)->Recover();
  REQUIRE(recovered.ok());
  TestDaemon daemon(journal->get());
  daemon.jobs().AddArchived(std::move(*recovered));

  v1::JobStatus status;
  REQUIRE(daemon.Get("job-1", &status).ok());
  CHECK(status.spec().SerializeAsString() == live.spec().SerializeAsString());
  CHECK(status.state() == v1::SUCCEEDED);
  CHECK(status.reason() == live.reason());
  CHECK(status.generation() == live.generation());
  CHECK(status.size() == live.size());
  CHECK(status.resets() == live.resets());
  CHECK(status.started_unix() > 0);
  CHECK(status.ended_unix() >= status.started_unix());
  const auto events = daemon.Watch("job-1");
  CHECK(Seqs(events) == live_seqs);
  CHECK(events.back().kind() == v1::JobEvent::JOB_ENDED);
  CHECK(events.back().message() == live.reason());
  // The restarted daemon records its own jobs after the recovered ones.
  CHECK(daemon.Submit(LocalSpec({"/bin/true"})) == "job-2");
}

}  // namespace
}  // namespace horovodd::daemon
