// horovodctl's connection to horovodd: the JobService calls it makes, each
// with a deadline, sent through a LeaderFollower (any daemon of an HA setup
// answers reads; writes reach the leader), and gRPC failures turned into
// absl::Status whose message says what went wrong in a user's terms (which
// daemon could not be reached, or every one tried and why).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/leader_follower/leader_follower.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::cli {

struct ClientOptions {
  absl::Duration rpc_timeout = absl::Seconds(10);  // per unary call, per daemon tried
};

class JobClient {
 public:
  // `daemons`'s channels carry the caller's credentials (see ConnectToDaemon).
  JobClient(ClientOptions options, LeaderFollower* daemons);

  // The daemon that answered last.
  std::string address() const { return daemons_->current(); }

  absl::StatusOr<std::vector<v1::JobStatus>> ListJobs();
  absl::StatusOr<v1::JobStatus> GetJob(const std::string& job_id);
  absl::Status CancelJob(const std::string& job_id, const std::string& reason);
  // Asks the daemon to stop (JobService.StopDaemon), ending its jobs first with
  // stop_jobs; answers once the stop is accepted.
  absl::StatusOr<v1::StopDaemonResponse> StopDaemon(bool stop_jobs, const std::string& reason);
  // Drains (drained=true) or undrains `host` in `job_id`, or in every running
  // job when job_id is empty. Returns the jobs it applied to.
  absl::StatusOr<std::vector<std::string>> SetDrained(const std::string& host,
                                                      const std::string& job_id, bool drained);
  absl::StatusOr<std::vector<v1::JobEvent>> WorkerOutput(const std::string& job_id, int rank,
                                                         int max_lines);

  // Streams the job's events from `from_seq` (0: the oldest kept) to
  // `on_event` until the daemon ends the stream, which it does after the
  // JOB_ENDED event. No deadline: a job may run for days. When the daemon
  // goes away mid-stream, the watch resumes after the last event seen on
  // whichever daemon answers (a restarted one, or the new leader).
  absl::Status Watch(const std::string& job_id, uint64_t from_seq,
                     const std::function<void(const v1::JobEvent&)>& on_event);

 private:
  // Runs one unary call (given a stub and a context with its deadline set)
  // through the follower.
  absl::Status Call(
      const std::function<grpc::Status(v1::JobService::Stub&, grpc::ClientContext&)>& call);
  absl::Status ToStatus(const FollowResult& result) const;

  const ClientOptions options_;
  LeaderFollower* const daemons_;
};

}  // namespace horovodd::cli
