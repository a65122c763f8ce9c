#include "daemon/job_lifecycle/job_lifecycle.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace horovodd::daemon {
namespace {

using Phase = JobLifecycle::Phase;

template <typename T>
struct Move {
  T from;
  T to;
};

// The states a job reports, and what moves it (the method named, JobDriver's
// unless its class is named).
// A job taken back after a restart starts in the state its checkpoint had
// (Restore); that is not a move.
constexpr Move<v1::JobState> kStateMoves[] = {
    {v1::PENDING, v1::RUNNING},    // the first generation formed (TryCompleteRendezvous)
    {v1::RUNNING, v1::RESETTING},  // a new generation replaces the running one (Replan)
    {v1::RESETTING, v1::RUNNING},  // the new generation formed (TryCompleteRendezvous)
    // The end (JobEnd::Finish), from every state a job runs in.
    {v1::PENDING, v1::SUCCEEDED},
    {v1::PENDING, v1::FAILED},
    {v1::PENDING, v1::CANCELLED},
    {v1::RUNNING, v1::SUCCEEDED},
    {v1::RUNNING, v1::FAILED},
    {v1::RUNNING, v1::CANCELLED},
    {v1::RESETTING, v1::SUCCEEDED},
    {v1::RESETTING, v1::FAILED},
    {v1::RESETTING, v1::CANCELLED},
};

// The phases, which only move forward, and what moves them.
constexpr Move<Phase> kPhaseMoves[] = {
    // Discovery's first answer (JobHosts::OnHosts), or a job taken back with its
    // hosts (ResumeNow).
    {Phase::kAwaitingHosts, Phase::kPlanning},
    // A member finished (OnWorkerExit; ResumeNow for one that had). Before the
    // hosts are known only in a job taken back after a restart.
    {Phase::kAwaitingHosts, Phase::kFinishing},
    {Phase::kPlanning, Phase::kFinishing},
    // The job ended (JobEnd::Finish): cancelled, failed or succeeded.
    {Phase::kAwaitingHosts, Phase::kStopping},
    {Phase::kPlanning, Phase::kStopping},
    {Phase::kFinishing, Phase::kStopping},
    // Its last worker is gone (JobEnd::MaybeCloseLog).
    {Phase::kStopping, Phase::kEnded},
};

template <typename T, size_t N>
bool InTable(const Move<T> (&table)[N], T from, T to) {
  for (const Move<T>& move : table) {
    if (move.from == from && move.to == to) return true;
  }
  return false;
}

}  // namespace

bool JobLifecycle::Allowed(v1::JobState from, v1::JobState to) {
  return InTable(kStateMoves, from, to);
}

bool JobLifecycle::Allowed(Phase from, Phase to) { return InTable(kPhaseMoves, from, to); }

bool JobLifecycle::IsTerminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

const char* JobLifecycle::PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kAwaitingHosts:
      return "awaiting hosts";
    case Phase::kPlanning:
      return "planning";
    case Phase::kFinishing:
      return "finishing";
    case Phase::kStopping:
      return "stopping";
    case Phase::kEnded:
      return "ended";
  }
  return "?";
}

JobLifecycle::JobLifecycle(EventLog& events, const Clock& clock, std::function<void()> changed)
    : events_(events), clock_(clock), changed_(std::move(changed)), created_(clock.Now()) {}

void JobLifecycle::MarkStarted() { started_ = clock_.Now(); }

void JobLifecycle::Restore(v1::JobState state, absl::Time started, int64_t generation) {
  HVDD_CHECK(state_ == v1::PENDING && phase_ == Phase::kAwaitingHosts)
      << "only a new job is restored, not one " << v1::JobState_Name(state_) << " and "
      << PhaseName(phase_);
  started_ = started;
  if (IsTerminal(state)) phase_ = Phase::kStopping;
  if (state != state_) Report(state, generation);
}

void JobLifecycle::MoveTo(v1::JobState state, int64_t generation) {
  HVDD_CHECK(!IsTerminal(state)) << v1::JobState_Name(state) << ": End() ends a job";
  if (state == state_) return;
  HVDD_CHECK(Allowed(state_, state))
      << "job state " << v1::JobState_Name(state_) << " -> " << v1::JobState_Name(state);
  Report(state, generation);
}

bool JobLifecycle::HostsFound() {
  if (phase_ != Phase::kAwaitingHosts) return false;
  Advance(Phase::kPlanning);
  return true;
}

bool JobLifecycle::StartFinishing() {
  if (phase_ == Phase::kFinishing) return false;
  Advance(Phase::kFinishing);
  return true;
}

bool JobLifecycle::End(v1::JobState state, const std::string& reason, int64_t generation) {
  HVDD_CHECK(IsTerminal(state)) << v1::JobState_Name(state) << " does not end a job";
  if (Terminal()) return false;
  HVDD_CHECK(Allowed(state_, state))
      << "job state " << v1::JobState_Name(state_) << " -> " << v1::JobState_Name(state);
  Advance(Phase::kStopping);
  reason_ = reason;
  Report(state, generation);
  ended_at_ = clock_.Now();
  return true;
}

void JobLifecycle::Close(int64_t generation) {
  Advance(Phase::kEnded);
  v1::JobEvent end;
  end.set_kind(v1::JobEvent::JOB_ENDED);
  end.set_state(state_);
  end.set_message(reason_);
  end.set_generation(generation);
  events_.Append(std::move(end));
  events_.Close();
  ended_.Notify();
}

void JobLifecycle::Advance(Phase to) {
  HVDD_CHECK(Allowed(phase_, to)) << "job phase " << PhaseName(phase_) << " -> " << PhaseName(to);
  phase_ = to;
}

void JobLifecycle::Report(v1::JobState state, int64_t generation) {
  state_ = state;
  v1::JobEvent e;
  e.set_kind(v1::JobEvent::STATE);
  e.set_state(state);
  e.set_generation(generation);
  e.set_message(absl::StrCat("job is ", v1::JobState_Name(state)));
  events_.Append(std::move(e));
  if (changed_) changed_();
}

}  // namespace horovodd::daemon
