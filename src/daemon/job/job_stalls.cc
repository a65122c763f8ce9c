// JobDriver: stalls. The detector (daemon/stall/stall_detector.h) judges the
// ready generation's reports on its own timer; the driver says what it
// named in the job's events and acts on it: evicts the culprits of an
// elastic job (of a link, its awaited end; their exits count as failures:
// their hosts are blacklisted and the others reset), fails a fixed-size job
// naming them, evicts the stragglers --evict-stragglers asks for.
#include <algorithm>
#include <csignal>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/job/job_driver.h"

namespace horovodd::daemon {
namespace {

std::string Seconds(double s) { return absl::StrCat(absl::SixDigits(s), "s"); }

std::string Ranks(const google::protobuf::RepeatedField<int32_t>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

std::string Name(const v1::StallCulprit& c) {
  return absl::StrCat("rank ", c.rank(), " (", c.host(), ", pid ", c.pid(), "; ", c.last_did(),
                      ")");
}

std::string End(const v1::StallCulprit& c) {
  return absl::StrCat("rank ", c.rank(), " (", c.host(), ", pid ", c.pid(), ")");
}

// A link's two ends: the rank that waits first, then the one it waits for.
std::pair<const v1::StallCulprit*, const v1::StallCulprit*> LinkEnds(const v1::StallReport& stall) {
  const v1::StallCulprit* waiting = nullptr;
  const v1::StallCulprit* awaited = nullptr;
  for (const auto& c : stall.culprits()) (c.awaited() ? awaited : waiting) = &c;
  return {waiting, awaited};
}

// "ranks 0, 2, 3 have waited 5.2s in allreduce 'grad.w'; missing: rank 1 (a, pid 9; ...)".
std::string Describe(const v1::StallReport& stall) {
  const v1::CollectiveWait& c = stall.collective();
  std::string text = absl::StrCat(
      Ranks(stall.waiting_ranks()), stall.waiting_ranks_size() == 1 ? " has" : " have", " waited ",
      Seconds(c.waited_seconds()), " in ", c.operation(), " '", c.name(), "'");
  std::vector<std::string> names;
  for (const auto& culprit : stall.culprits()) names.push_back(Name(culprit));
  if (stall.kind() == "missing") {
    absl::StrAppend(&text, "; missing: ", absl::StrJoin(names, ", "));
  } else if (stall.kind() == "link") {
    const auto [waiting, awaited] = LinkEnds(stall);
    if (waiting != nullptr && awaited != nullptr) {
      const bool awaited_passed =
          std::find(stall.waiting_ranks().begin(), stall.waiting_ranks().end(), awaited->rank()) ==
          stall.waiting_ranks().end();
      // One way stalled: the awaited end got its peer's data, went on, and waits for more.
      const std::string how =
          awaited_passed ? absl::StrCat("; rank ", awaited->rank(),
                                        " completed it and waits for rank ", waiting->rank(),
                                        " in its next collective, while rank ", waiting->rank(),
                                        " still waits for rank ", awaited->rank(), "'s data: ")
                         : absl::StrCat("; every rank submitted it and rank ", waiting->rank(),
                                        " waits for rank ", awaited->rank(), "'s data: ");
      text = absl::StrCat("link between ", End(*waiting), " and ", End(*awaited),
                          " stalled: ", text, how, absl::StrJoin(names, ", "));
    } else {
      absl::StrAppend(&text, "; every rank submitted it; the transfers between these ends stall: ",
                      absl::StrJoin(names, ", "));
    }
  } else {
    absl::StrAppend(&text, "; every rank submitted it and none says which peer it waits for: ",
                    absl::StrJoin(names, ", "));
  }
  return text;
}

}  // namespace

void JobDriver::WatchStalls() {
  if (lifecycle_.Terminal()) return;
  stall_timer_ = loop_.PostAfter(stall_.period(), [this] { CheckStalls(); });
}

void JobDriver::CheckStalls() {
  stall_timer_ = 0;
  if (lifecycle_.Terminal()) return;
  // Judged (and acted on) once decisions go on again (job_hold.cc).
  if (Held()) {
    WatchStalls();
    return;
  }
  // Judged only while the generation trains: not while it resets, nor while
  // its ranks finish one by one.
  if (lifecycle_.state() == v1::RUNNING && !lifecycle_.Finishing() &&
      generations_.ready_generation() > 0) {
    std::vector<RankReport> reports;
    const std::vector<int64_t>& members = generations_.ready_members();
    for (size_t rank = 0; rank < members.size(); ++rank) {
      const Worker& w = workers_.at(members[rank]);
      RankReport r;
      r.rank = static_cast<int>(rank);
      r.worker_id = w.id;
      r.host = w.host;
      r.pid = w.pid;
      r.activity = w.activity.has_value() ? &*w.activity : nullptr;
      r.reported_at = w.activity_at;
      reports.push_back(std::move(r));
    }
    StallDetector::Verdict verdict = stall_.Check(clock_.Now(), reports);
    if (const std::optional<v1::StallReport>& named = stall_.current(); named.has_value()) {
      goodput_.Stalled(absl::UnixEpoch() + absl::Seconds(named->collective().since_unix()),
                       clock_.Now());
    }
    if (verdict.cleared.has_value()) {
      recorder_.Record(v1::JobEvent::INFO,
                       absl::StrCat("the stall in ", verdict.cleared->collective().operation(),
                                    " '", verdict.cleared->collective().name(), "' cleared after ",
                                    Seconds(verdict.cleared->collective().waited_seconds())),
                       "stall_cleared");
    }
    if (verdict.named.has_value()) {
      std::string then;
      if (verdict.named->evict_unix() > 0) {
        const v1::StallCulprit* awaited = LinkEnds(*verdict.named).second;
        const std::string evicted =
            verdict.named->kind() == "link" && awaited != nullptr
                ? absl::StrCat("; rank ", awaited->rank(), " (the awaited end) is evicted")
                : std::string("; they are evicted");
        then = absl::StrCat(spec_.elastic() ? evicted : "; the job fails", " if it lasts ",
                            absl::FormatDuration(stall_.settings().act_after),
                            stall_.settings().shutdown > absl::ZeroDuration()
                                ? " (--stall-check-shutdown-time-seconds)"
                                : " (horovodd's default for an elastic job)");
      }
      v1::JobEvent e;
      e.set_kind(v1::JobEvent::WARNING);
      e.set_code("stall");
      e.set_message(absl::StrCat("stall: ", Describe(*verdict.named), then));
      *e.mutable_stall() = *verdict.named;
      recorder_.Record(std::move(e));
    }
    if (verdict.act.has_value()) ActOnStall(*verdict.act);
    // A slow rank costs the job time; evicting it must not cost the job.
    // An evicted or lost rank's host is blacklisted, so every rank there
    // goes: the hosts already on their way out count as gone for each
    // straggler judged after them.
    std::set<std::string> leaving = LeavingHosts();
    for (const v1::StallCulprit& c : verdict.evict_stragglers) {
      if (lifecycle_.Terminal()) return;
      std::set<std::string> gone = leaving;
      gone.insert(c.host());
      const int left = RanksLeftWithout(gone);
      if (left < std::max(spec_.min_np(), 1)) {
        recorder_.Record(
            v1::JobEvent::WARNING,
            absl::StrCat("rank ", c.rank(), " on ", c.host(),
                         " is a straggler but is not evicted: without its host (and "
                         "the hosts already leaving) ",
                         left, " rank(s) would be left, under --min-np ", spec_.min_np()),
            "straggler_kept");
        continue;
      }
      Evict(c.worker_id(), absl::StrCat("a straggler (--evict-stragglers ",
                                        spec_.evict_stragglers(), "): ", c.last_did()));
      leaving.insert(c.host());
    }
  }
  WatchStalls();
}

void JobDriver::ActOnStall(const v1::StallReport& stall) {
  const std::string what = absl::StrCat(
      "stalled past ", absl::FormatDuration(stall_.settings().act_after), ": ", Describe(stall));
  v1::JobEvent e;
  e.set_kind(v1::JobEvent::WARNING);
  e.set_code("stall_evict");
  e.set_message(absl::StrCat(
      spec_.elastic() ? "evicting the stall's culprits: " : "the stall fails the job: ", what));
  *e.mutable_stall() = stall;
  recorder_.Record(std::move(e));
  if (!spec_.elastic()) {
    // Horovod's stall shutdown ends a fixed-size job; here it names who.
    end_.Finish(v1::FAILED, absl::StrCat("Horovod stall check: ", what));
    return;
  }
  if (stall.kind() == "unknown") {
    // Every rank waits and none says on whom: evicting them all would end the
    // job, which is worse than the stall. The ring's own timeout
    // (--gloo-timeout-seconds) breaks a stalled transfer into a reset.
    recorder_.Record(v1::JobEvent::WARNING,
                     "the stall's culprits cannot be told apart (every rank waits and none "
                     "says on whom): no rank is evicted",
                     "stall_unresolved");
    return;
  }
  // Of a link, the end whose data did not arrive; its exit counts as a
  // failure, so where the ends' hosts differ its host is blacklisted.
  std::vector<const v1::StallCulprit*> evicted;
  for (const v1::StallCulprit& c : stall.culprits()) {
    if (stall.kind() != "link" || c.awaited()) evicted.push_back(&c);
  }
  // Unlike a straggler's, a stall's eviction does not wait for --min-np: the
  // stalled job makes no progress at any size, and a hung rank holds it up
  // as a failed one would. Horovod, after a failure that leaves too few
  // slots, waits up to --elastic-timeout for hosts, then fails; so does the
  // job here once the culprits' hosts are gone (replan's below-min timer).
  std::set<std::string> gone = LeavingHosts();
  for (const v1::StallCulprit* c : evicted) gone.insert(c->host());
  int left = RanksLeftWithout(gone);
  if (left == 0) {
    // Where no host would be left, the planner keeps the ranks on the
    // blacklisted ones (blacklisted_kept): all but the evicted and the lost.
    std::set<int64_t> evicted_ids;
    for (const v1::StallCulprit* c : evicted) evicted_ids.insert(c->worker_id());
    for (int64_t id : generations_.ready_members()) {
      left += workers_.at(id).lost_reason.empty() && evicted_ids.count(id) == 0;
    }
  }
  if (left < std::max(spec_.min_np(), 1)) {
    recorder_.Record(
        v1::JobEvent::WARNING,
        absl::StrCat("evicting the stall's culprits leaves ", left, " rank(s), under --min-np ",
                     spec_.min_np(),
                     ": they are evicted all the same (the stalled job makes no progress at any "
                     "size); unless --min-np slots come back, the job waits up to "
                     "--elastic-timeout ",
                     spec_.elastic_timeout_seconds(), "s for them, then fails"),
        "stall_below_min_np");
  }
  for (const v1::StallCulprit* c : evicted) {
    if (lifecycle_.Terminal()) return;
    Evict(c->worker_id(),
          absl::StrCat("held up ", stall.collective().operation(), " '", stall.collective().name(),
                       "' past ", absl::FormatDuration(stall_.settings().act_after)));
  }
}

std::set<std::string> JobDriver::LeavingHosts() const {
  std::set<std::string> leaving;
  for (int64_t id : generations_.ready_members()) {
    const Worker& w = workers_.at(id);
    if (!w.lost_reason.empty()) leaving.insert(w.host);
  }
  return leaving;
}

int JobDriver::RanksLeftWithout(const std::set<std::string>& gone) const {
  int left = 0;
  for (int64_t id : generations_.ready_members()) left += gone.count(workers_.at(id).host) == 0;
  return left;
}

void JobDriver::Evict(int64_t worker_id, const std::string& reason) {
  Worker* w = workers_.Find(worker_id);
  if (w == nullptr || w->handle == 0 || !w->lost_reason.empty()) return;
  w->lost_reason = absl::StrCat("evicted: ", reason);
  recorder_.Record(
      v1::JobEvent::WARNING,
      absl::StrCat(generations_.Describe(*w), " evicted: ", reason,
                   "; SIGTERM, then SIGKILL after ", absl::FormatDuration(kEvictGrace)),
      "worker_evicted");
  resets_.Detected(clock_.Now());
  const int64_t handle = w->handle;
  context_.launcher->Signal(handle, SIGTERM).IgnoreError();
  loop_.PostAfter(kEvictGrace, [this, worker_id, handle] {
    const Worker* still = workers_.Find(worker_id);
    if (still != nullptr && still->handle == handle) {
      context_.launcher->Signal(handle, SIGKILL).IgnoreError();
    }
  });
}

}  // namespace horovodd::daemon
