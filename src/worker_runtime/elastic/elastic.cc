// elastic::State's commit protocol and elastic::Run, the loop that rebuilds
// the job around the state after membership changes and lost peers.
#include "horovodd/elastic.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "horovodd/horovodd.h"
#include "worker_runtime/runtime/runtime.h"

namespace horovodd::elastic {
namespace {

// Marks the ABORTED status of a host update, so that IsHostsUpdated tells it
// from a collective aborted by the same membership change.
constexpr char kHostsUpdatedPayload[] = "horovodd.elastic/hosts-updated";

absl::Status NotInitialized(const char* what) {
  return absl::FailedPreconditionError(absl::StrCat(what, " needs horovodd::Init() first"));
}

// A lost peer or a membership change under a collective: Run restores the
// last commit and rebuilds.
bool IsCollectiveFailure(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         (status.code() == absl::StatusCode::kAborted && !IsHostsUpdated(status));
}

}  // namespace

absl::StatusOr<int64_t> State::SyncFromNewest(int64_t commits) {
  std::vector<int64_t> mine = {commits};
  HVDD_ASSIGN_OR_RETURN(Tensor all, Allgather(ViewOf(mine)));
  const int64_t* each = all.data_as<int64_t>();
  const int64_t* newest = std::max_element(each, each + all.numel());
  HVDD_RETURN_IF_ERROR(Sync(static_cast<int>(newest - each)));
  return *newest;
}

absl::Status HostsUpdatedError(int64_t current_generation, int64_t new_generation) {
  absl::Status status =
      absl::AbortedError(absl::StrCat("hosts updated: the job moved from generation ",
                                      current_generation, " to generation ", new_generation));
  status.SetPayload(kHostsUpdatedPayload, absl::Cord(absl::StrCat(new_generation)));
  return status;
}

bool IsHostsUpdated(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted &&
         status.GetPayload(kHostsUpdatedPayload).has_value();
}

absl::Status State::Commit() {
  Save();
  ++commits_;
  internal::Runtime* runtime = internal::CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("elastic::State::Commit");
  runtime->ReportCommit(commits_);
  return CheckHostUpdates();
}

absl::Status State::CheckHostUpdates() {
  internal::Runtime* runtime = internal::CurrentRuntime();
  if (runtime == nullptr) return NotInitialized("elastic::State::CheckHostUpdates");
  // Ranks hear of a new generation at different moments; agreeing on the
  // newest any of them heard makes all interrupt at this same step.
  std::vector<int64_t> newest = {runtime->newest_generation()};
  AllreduceOptions options;
  options.op = ReduceOp::kMax;
  options.name = "elastic.check_host_updates";
  HVDD_RETURN_IF_ERROR(Allreduce(ViewOf(newest), options));
  if (newest[0] > runtime->generation()) {
    return HostsUpdatedError(runtime->generation(), newest[0]);
  }
  return absl::OkStatus();
}

void State::RegisterResetCallback(std::function<void()> callback) {
  reset_callbacks_.push_back(std::move(callback));
}

void State::RunResetCallbacks() {
  for (const auto& callback : reset_callbacks_) callback();
}

absl::Status Run(State& state, const std::function<absl::Status(State&)>& train) {
  if (internal::CurrentRuntime() == nullptr) return NotInitialized("elastic::Run");
  bool after_reset = false;
  while (true) {
    if (after_reset) {
      HVDD_RETURN_IF_ERROR(internal::RejoinCurrentRuntime());
    }
    // Every rank syncs, every time (a per-rank choice to skip it deadlocks:
    // Horovod issue 3494). Saving afterwards makes the synced state the
    // restore point on every rank, so ranks never restore to different ones.
    absl::StatusOr<int64_t> newest = state.SyncFromNewest(state.commits_);
    absl::Status status = newest.status();
    if (status.ok()) {
      state.commits_ = *newest;
      state.Save();
      if (after_reset) state.RunResetCallbacks();
      status = train(state);
      if (status.ok()) return status;
    }
    if (IsCollectiveFailure(status)) {
      internal::CurrentRuntime()->ReportFailure(status);
      state.Restore();
    } else if (!IsHostsUpdated(status)) {
      return status;
    }
    ++state.resets_;
    after_reset = true;
  }
}

}  // namespace horovodd::elastic
