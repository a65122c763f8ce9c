// cli/leader_follower against real gRPC servers on loopback port 0 that play
// horovodd's HA roles by the contract of common/standby_contract.h: a leader that
// answers, standbys that refuse writes naming the leader (or none), daemons
// that are gone. Checks that a call follows the hint, skips the dead, gives
// up naming every address and why, never loops between two standbys that
// name each other, and that a watch resumes on another daemon after the
// last event seen.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cli/leader_follower/job_watch.h"
#include "cli/leader_follower/leader_follower.h"
#include "common/standby_contract.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::cli {
namespace {

enum class Role { kLeader, kStandby, kStandbyWithoutMetadata };

// One horovodd's JobService as far as these tests need: ListJobs answers,
// SubmitJob is a write, WatchJob streams `events` from the seq asked for.
class FakeDaemon final : public v1::JobService::Service {
 public:
  explicit FakeDaemon(Role role) : role_(role) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  ~FakeDaemon() override { Stop(); }

  void Stop() {
    if (server_ != nullptr) {
      // Open streams are cancelled: the daemon "went away".
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
      server_->Wait();
      server_.reset();
    }
  }

  const std::string& address() const { return address_; }
  void set_leader(std::string leader) { leader_ = std::move(leader); }
  // WatchJob sends these (seq >= from_seq), then holds the stream open
  // unless the last one is JOB_ENDED.
  void set_events(std::vector<v1::JobEvent> events) { events_ = std::move(events); }
  int submits() const { return submits_.load(); }
  uint64_t watched_from() const { return watched_from_.load(); }

  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                        v1::ListJobsResponse* response) override {
    response->add_jobs()->set_job_id(address_);  // reads: any daemon answers
    return grpc::Status::OK;
  }

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override {
    submits_.fetch_add(1);
    if (role_ != Role::kLeader) {
      if (role_ == Role::kStandby) context->AddTrailingMetadata(kLeaderMetadataKey, leader_);
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, StandbyRefusal(address_, leader_));
    }
    if (request->spec().argv_size() > 0 && request->spec().argv(0) == "bad") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "command 'bad' is refused");
    }
    response->set_job_id(absl::StrCat("job-on-", address_));
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    watched_from_ = request->from_seq();
    for (const v1::JobEvent& event : events_) {
      if (event.seq() >= request->from_seq()) writer->Write(event);
    }
    if (!events_.empty() && events_.back().kind() == v1::JobEvent::JOB_ENDED) {
      return grpc::Status::OK;
    }
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(10));
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  }

 private:
  const Role role_;
  std::string leader_;
  std::vector<v1::JobEvent> events_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<int> submits_{0};
  std::atomic<uint64_t> watched_from_{0};
};

// An address nothing listens on: a server's port, once it is gone.
std::string DeadAddress() {
  FakeDaemon gone(Role::kLeader);
  std::string address = gone.address();
  gone.Stop();
  return address;
}

LeaderFollower Follower(std::vector<std::string> addresses,
                        absl::Duration leader_wait = absl::Seconds(5)) {
  FollowOptions options;
  options.addresses = std::move(addresses);
  options.leader_wait = leader_wait;
  options.initial_backoff = absl::Milliseconds(50);
  options.max_backoff = absl::Milliseconds(200);
  return LeaderFollower(options, [](const std::string& address) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  });
}

// One SubmitJob through the follower; the job id it got, if any.
FollowResult Submit(LeaderFollower& daemons, std::string* job_id = nullptr,
                    const std::string& command = "train") {
  v1::SubmitJobRequest request;
  request.mutable_spec()->add_argv(command);
  return daemons.Run([&](const std::string&, const std::shared_ptr<grpc::Channel>& channel,
                         grpc::ClientContext& context) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::SubmitJobResponse response;
    grpc::Status status = v1::JobService::NewStub(channel)->SubmitJob(&context, request, &response);
    if (job_id != nullptr) *job_id = response.job_id();
    return status;
  });
}

v1::JobEvent Event(uint64_t seq, bool ended = false) {
  v1::JobEvent event;
  event.set_seq(seq);
  event.set_kind(ended ? v1::JobEvent::JOB_ENDED : v1::JobEvent::INFO);
  if (ended) event.set_state(v1::SUCCEEDED);
  return event;
}

TEST_CASE("SplitDaemonAddresses: a comma-separated list, blanks dropped, no empty element") {
  CHECK(*SplitDaemonAddresses("h1:7451") == std::vector<std::string>{"h1:7451"});
  CHECK(*SplitDaemonAddresses(" h1:7451, h2:7451 ") ==
        std::vector<std::string>{"h1:7451", "h2:7451"});
  CHECK(SplitDaemonAddresses("h1:7451,,h2:7451").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(SplitDaemonAddresses("").status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("A standby's refusal sends the call to the leader it names") {
  FakeDaemon leader(Role::kLeader);
  FakeDaemon standby(Role::kStandby);
  standby.set_leader(leader.address());
  // Only the standby is listed: the hint alone finds the leader.
  LeaderFollower daemons = Follower({standby.address()});
  std::string job_id;
  FollowResult result = Submit(daemons, &job_id);
  REQUIRE(result.status.ok());
  CHECK(result.address == leader.address());
  CHECK(job_id == absl::StrCat("job-on-", leader.address()));
  CHECK(standby.submits() == 1);
  CHECK(leader.submits() == 1);
  // The next call goes straight to the leader.
  REQUIRE(Submit(daemons).status.ok());
  CHECK(standby.submits() == 1);
  CHECK(daemons.current() == leader.address());
}

TEST_CASE("Unreachable daemons are skipped; a read is answered by any daemon") {
  FakeDaemon standby(Role::kStandby);
  FakeDaemon leader(Role::kLeader);
  standby.set_leader(leader.address());
  LeaderFollower daemons = Follower({DeadAddress(), standby.address(), leader.address()});
  FollowResult read = daemons.Run([](const std::string&, const std::shared_ptr<grpc::Channel>& c,
                                     grpc::ClientContext& context) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListJobsResponse response;
    return v1::JobService::NewStub(c)->ListJobs(&context, v1::ListJobsRequest(), &response);
  });
  REQUIRE(read.status.ok());
  CHECK(read.address == standby.address());  // the first that answered
  FollowResult write = Submit(daemons);
  REQUIRE(write.status.ok());
  CHECK(write.address == leader.address());
}

TEST_CASE("A daemon's own error is the answer: no other daemon is asked") {
  FakeDaemon leader(Role::kLeader);
  FakeDaemon other(Role::kLeader);
  LeaderFollower daemons = Follower({leader.address(), other.address()});
  FollowResult result = Submit(daemons, nullptr, "bad");
  CHECK(result.status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(result.gave_up.empty());
  CHECK(other.submits() == 0);
}

TEST_CASE("With no leader elected it retries until the deadline, then names every address") {
  FakeDaemon standby(Role::kStandby);               // "no leader is elected yet"
  FakeDaemon quiet(Role::kStandbyWithoutMetadata);  // the message only
  const std::string dead = DeadAddress();
  LeaderFollower daemons =
      Follower({standby.address(), quiet.address(), dead}, absl::Milliseconds(800));
  const absl::Time start = absl::Now();
  FollowResult result = Submit(daemons);
  const absl::Duration took = absl::Now() - start;
  INFO(result.gave_up);
  CHECK(took >= absl::Milliseconds(500));
  CHECK(took < absl::Seconds(10));
  CHECK(standby.submits() >= 2);  // it retried
  CHECK(absl::StartsWith(result.gave_up, "no horovodd leader took the call within 800ms; tried "));
  CHECK(absl::StrContains(result.gave_up,
                          absl::StrCat(standby.address(), " (this horovodd (", standby.address(),
                                       ") is a standby; no leader is elected "
                                       "yet)")));
  CHECK(absl::StrContains(result.gave_up, absl::StrCat(quiet.address(), " (this horovodd")));
  CHECK(absl::StrContains(result.gave_up, absl::StrCat(dead, " (unreachable: ")));
}

TEST_CASE("Two standbys naming each other: each asked once a round, then it gives up") {
  FakeDaemon a(Role::kStandby);
  FakeDaemon b(Role::kStandby);
  a.set_leader(b.address());
  b.set_leader(a.address());
  LeaderFollower daemons = Follower({a.address()}, absl::Milliseconds(500));
  FollowResult result = Submit(daemons);
  INFO(result.gave_up);
  CHECK(!result.status.ok());
  CHECK(absl::StrContains(result.gave_up, absl::StrCat("the leader is ", b.address())));
  CHECK(absl::StrContains(result.gave_up, absl::StrCat("the leader is ", a.address())));
  // 500 ms of rounds 50, 100, 200 ms apart: a handful, never a tight loop.
  CHECK(a.submits() >= 1);
  CHECK(a.submits() <= 6);
  CHECK(b.submits() == a.submits());
}

TEST_CASE("A lone unreachable daemon fails at once, for the caller to word") {
  const std::string dead = DeadAddress();
  LeaderFollower daemons = Follower({dead});
  const absl::Time start = absl::Now();
  FollowResult result = Submit(daemons);
  CHECK(absl::Now() - start < absl::Seconds(3));
  CHECK(result.status.code() == absl::StatusCode::kUnavailable);
  CHECK(result.gave_up.empty());
  CHECK(result.address == dead);
  CHECK(absl::StartsWith(DescribeFailure(result).message(),
                         absl::StrCat("cannot reach horovodd at ", dead, ": ")));
  // Several, none reachable: the list.
  LeaderFollower two = Follower({dead, DeadAddress()});
  CHECK(absl::StartsWith(Submit(two).gave_up, absl::StrCat("cannot reach any horovodd; tried ",
                                                           dead, " (unreachable: ")));
}

TEST_CASE("A watch resumes on another daemon after the last event seen") {
  auto first = std::make_unique<FakeDaemon>(Role::kLeader);
  FakeDaemon second(Role::kLeader);
  first->set_events({Event(1), Event(2)});
  second.set_events({Event(1), Event(2), Event(3), Event(4, /*ended=*/true)});
  LeaderFollower daemons = Follower({first->address(), second.address()});
  std::vector<uint64_t> seen;
  absl::Mutex mu;
  std::atomic<bool> done{false};
  WatchOutcome outcome;
  std::thread watcher([&] {
    outcome = WatchJobEvents(daemons, "job-1", 0, [&](const v1::JobEvent& event) {
      absl::MutexLock lock(&mu);
      seen.push_back(event.seq());
    });
    done = true;
  });
  // Both of the first daemon's events arrived; then it goes away.
  for (absl::Time until = absl::Now() + absl::Seconds(10); absl::Now() < until;) {
    {
      absl::MutexLock lock(&mu);
      if (seen.size() == 2) break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  first->Stop();
  watcher.join();
  REQUIRE(outcome.status.ok());
  CHECK(outcome.ended);
  CHECK(outcome.end.state() == v1::SUCCEEDED);
  CHECK(outcome.address == second.address());
  CHECK(second.watched_from() == 3);
  CHECK(seen == std::vector<uint64_t>{1, 2, 3, 4});
}

TEST_CASE("A stopped watch is not reopened") {
  FakeDaemon daemon(Role::kLeader);
  daemon.set_events({Event(1)});
  LeaderFollower daemons = Follower({daemon.address()});
  WatchStopper stopper;
  std::atomic<int> events{0};
  WatchOutcome outcome;
  std::thread watcher([&] {
    outcome = WatchJobEvents(
        daemons, "job-1", 0, [&](const v1::JobEvent&) { ++events; }, &stopper);
  });
  for (absl::Time until = absl::Now() + absl::Seconds(10); absl::Now() < until && events == 0;) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  stopper.Stop();
  watcher.join();
  CHECK(events == 1);
  CHECK(!outcome.ended);
  CHECK(outcome.status.code() == absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace horovodd::cli
