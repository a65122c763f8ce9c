#include "daemon/job/job_end.h"

#include <csignal>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace horovodd::daemon {

JobEnd::JobEnd(const JobContext& context, EventLoop& loop, JobLifecycle& lifecycle,
               WorkerTable& workers, const GenerationPlanner& generations, EventRecorder& recorder,
               std::function<void()> stop, std::function<v1::JobStatus()> status)
    : context_(context),
      loop_(loop),
      lifecycle_(lifecycle),
      workers_(workers),
      generations_(generations),
      recorder_(recorder),
      stop_(std::move(stop)),
      status_(std::move(status)) {}

void JobEnd::Finish(v1::JobState state, const std::string& reason) {
  if (!lifecycle_.End(state, reason, generations_.generation())) return;
  stop_();
  // horovodrun prints the outcome from JOB_ENDED; this is for --verbose logs.
  recorder_.Record(v1::JobEvent::INFO,
                   absl::StrCat("job ", v1::JobState_Name(state), ": ", reason));
  for (auto& [id, w] : workers_) {
    w.Refuse(absl::AbortedError(absl::StrCat("job ended: ", reason)));
    if (w.handle != 0) context_.launcher->Signal(w.handle, SIGTERM).IgnoreError();
  }
  // Whoever ignores SIGTERM gets SIGKILL after a grace period.
  loop_.PostAfter(kKillGrace, [this] { workers_.SignalAll(context_.launcher, SIGKILL); });
  MaybeCloseLog();
}

void JobEnd::MaybeFinishSucceeded(Finishers whose) {
  HVDD_CHECK(lifecycle_.Finishing())
      << "success decided while the job is " << JobLifecycle::PhaseName(lifecycle_.phase());
  // A member that failed before anyone finished was written off by the reset
  // that followed (a failure after that ends the job: JobDriver::OnWorkerFailed),
  // and one that a shrink removed is no longer needed: once they have exited,
  // the job succeeds with the members that finished.
  const bool plain = whose == Finishers::kPlannedMembers;
  const auto& finishers = plain ? generations_.members() : generations_.ready_members();
  int finished = 0;
  for (int64_t m : finishers) {
    const Worker& w = workers_.at(m);
    if (w.state == v1::WORKER_SUCCEEDED) {
      ++finished;
    } else if (!((w.state == v1::WORKER_FAILED || w.state == v1::WORKER_REMOVED) && w.gone())) {
      return;
    }
  }
  std::string outcome = absl::StrCat(
      finished == static_cast<int>(finishers.size()) ? "all " : "", finished, " workers",
      plain ? "" : absl::StrCat(" of generation ", generations_.ready_generation()), " finished");
  if (finished != static_cast<int>(finishers.size())) {
    absl::StrAppend(&outcome, " (", finishers.size() - finished, " had left or failed before)");
  }
  Finish(v1::SUCCEEDED, outcome);
}

void JobEnd::MaybeCloseLog() {
  if (lifecycle_.phase() != JobLifecycle::Phase::kStopping) return;
  if (!workers_.AllGone()) return;  // still being stopped (or started)
  if (context_.observer != nullptr) {
    context_.observer->OnJobFinalStatus(context_.job_id, status_());
  }
  lifecycle_.Close(generations_.ready_generation());
}

}  // namespace horovodd::daemon
