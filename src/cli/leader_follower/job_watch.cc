#include "cli/leader_follower/job_watch.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::cli {

void WatchStopper::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

bool WatchStopper::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

bool WatchStopper::Attach(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return false;
  context_ = context;
  return true;
}

void WatchStopper::Detach() {
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
}

absl::Status DescribeFailure(const FollowResult& result) {
  if (!result.gave_up.empty()) return absl::UnavailableError(result.gave_up);
  if (result.status.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach horovodd at ", result.address, ": ", result.status.message()));
  }
  return result.status;
}

WatchOutcome WatchJobEvents(LeaderFollower& daemons, const std::string& job_id, uint64_t from_seq,
                            const std::function<void(const v1::JobEvent&)>& on_event,
                            WatchStopper* stopper) {
  WatchOutcome outcome;
  uint64_t next_seq = from_seq;
  bool resuming = false;
  absl::Time last_progress = absl::Now();
  for (;;) {
    bool progress = false;
    const FollowResult result = daemons.Run(
        [&](const std::string&, const std::shared_ptr<grpc::Channel>& channel,
            grpc::ClientContext& context) {
          if (stopper != nullptr && !stopper->Attach(&context)) {
            return grpc::Status(grpc::StatusCode::CANCELLED, "stopped");
          }
          auto stub = v1::JobService::NewStub(channel);
          v1::WatchJobRequest request;
          request.set_job_id(job_id);
          request.set_from_seq(next_seq);
          auto reader = stub->WatchJob(&context, request);
          v1::JobEvent event;
          while (reader->Read(&event)) {
            progress = true;
            next_seq = event.seq() + 1;
            if (event.kind() == v1::JobEvent::JOB_ENDED) {
              outcome.ended = true;
              outcome.end = event;
            }
            on_event(event);
          }
          grpc::Status status = reader->Finish();
          if (stopper != nullptr) stopper->Detach();
          // Events came: this daemon took the watch, whatever broke it after.
          return progress ? grpc::Status::OK : status;
        },
        /*retry_unreachable=*/resuming);
    outcome.address = result.address;
    if (outcome.ended) return outcome;
    if (stopper != nullptr && stopper->stopped()) {
      outcome.status = absl::CancelledError("stopped watching");
      return outcome;
    }
    if (!result.status.ok() || !result.gave_up.empty()) {
      outcome.status = DescribeFailure(result);
      if (resuming && result.gave_up.empty() &&
          result.status.code() == absl::StatusCode::kUnavailable) {
        outcome.status = absl::UnavailableError(
            absl::StrCat("lost horovodd at ", result.address, " while watching ", job_id,
                         " and no horovodd took the watch again: ", result.status.message()));
      }
      return outcome;
    }
    // The stream ended before the job did: open it again, after the last event seen.
    const absl::Time now = absl::Now();
    if (progress) last_progress = now;
    if (now - last_progress > daemons.options().leader_wait) {
      outcome.status = absl::UnavailableError(absl::StrCat(
          "horovodd at ", result.address, " ended the watch of ", job_id, " before the job ended"));
      return outcome;
    }
    if (!progress) absl::SleepFor(daemons.options().initial_backoff);
    resuming = true;
  }
}

}  // namespace horovodd::cli
