#include "daemon/stall/stall_detector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {
namespace {

// Reports place a wait on the daemon's clock from the worker's measure and
// the report's arrival: two reports of one wait differ by their transit.
constexpr absl::Duration kSameWait = absl::Milliseconds(250);
// A wait that began before its generation did (by more than transit) is a
// report from the generation before.
constexpr absl::Duration kGenerationSlack = absl::Seconds(1);

double Unix(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

absl::Time WaitSince(const RankReport& r) {
  return r.reported_at - absl::Seconds(r.activity->waiting().waited_seconds());
}

// A wait the detector judges: in the global set, and not a join (a rank that
// joined waits there for the others by design, for as long as they train).
bool InGlobalSet(const v1::WorkerActivity* a) {
  return a != nullptr && a->has_waiting() && a->waiting().process_set() == 0 &&
         a->waiting().operation() != "join";
}

// When `r` began to wait for the peer it names, on the daemon's clock (a
// report that does not say: when it began to wait in its collective).
absl::Time PeerWaitSince(const RankReport& r) {
  const double seconds = r.activity->waiting_on_seconds();
  return seconds > 0 ? r.reported_at - absl::Seconds(seconds) : WaitSince(r);
}

bool WaitsIn(const RankReport& r, const v1::CollectiveWait& c) {
  return InGlobalSet(r.activity) && r.activity->waiting().name() == c.name();
}

v1::StallCulprit CulpritOf(const RankReport& r, absl::Time now) {
  v1::StallCulprit c;
  c.set_rank(r.rank);
  c.set_worker_id(r.worker_id);
  c.set_host(r.host);
  c.set_pid(r.pid);
  c.set_peer(-1);
  if (r.activity == nullptr) {
    c.set_last_did("has reported nothing");
    return c;
  }
  const v1::WorkerActivity& a = *r.activity;
  c.set_last_commit(a.last_commit());
  std::string did;
  if (a.since_commit_seconds() >= 0) {
    const absl::Time at = r.reported_at - absl::Seconds(a.since_commit_seconds());
    c.set_last_commit_unix(Unix(at));
    did =
        absl::StrCat("commit ", a.last_commit(), " ",
                     absl::FormatDuration(absl::Trunc(now - at, absl::Milliseconds(100))), " ago");
  } else {
    did = "no commit yet";
  }
  absl::StrAppend(&did, ", ", a.completed(), " collective(s) completed in this generation");
  if (a.has_waiting()) {
    absl::StrAppend(&did, ", waits in ", a.waiting().operation(), " '", a.waiting().name(), "'");
    if (a.waiting().process_set() != 0)
      absl::StrAppend(&did, " of set ", a.waiting().process_set());
  }
  c.set_last_did(did);
  return c;
}

// The peer `r`'s transport is blocked on (the first it names), or -1.
int FirstPeer(const RankReport& r) {
  if (r.activity == nullptr || r.activity->waiting_on_ranks_size() == 0) return -1;
  return r.activity->waiting_on_ranks(0);
}

// Makes `report` a link's: `waiter` has waited since `waiter_since` for the
// data of `sender`, the awaited end; the lower rank first.
void SetLink(v1::StallReport& report, const RankReport& waiter, const RankReport& sender,
             absl::Time waiter_since, absl::Time now) {
  report.set_kind("link");
  v1::StallCulprit waiting = CulpritOf(waiter, now);
  waiting.set_peer(sender.rank);
  waiting.set_last_did(
      absl::StrCat(waiting.last_did(), "; has waited ",
                   absl::FormatDuration(absl::Trunc(now - waiter_since, absl::Milliseconds(100))),
                   " for rank ", sender.rank, "'s data"));
  v1::StallCulprit awaited = CulpritOf(sender, now);
  awaited.set_peer(waiter.rank);
  awaited.set_awaited(true);
  if (waiter.rank < sender.rank) {
    *report.add_culprits() = std::move(waiting);
    *report.add_culprits() = std::move(awaited);
  } else {
    *report.add_culprits() = std::move(awaited);
    *report.add_culprits() = std::move(waiting);
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

StallDetector::StallDetector(StallSettings settings, bool elastic)
    : settings_(settings), elastic_(elastic) {}

void StallDetector::NewGeneration(absl::Time at) {
  generation_at_ = at;
  current_.reset();
  straggling_.clear();
  slow_since_.clear();
  straggler_evicted_.clear();
}

absl::Duration StallDetector::period() const {
  // Named at most a fifth of a second after the warning time (the reports
  // place each wait's start on the daemon's clock, so their cadence does
  // not delay it).
  return std::clamp(settings_.warning / 10, absl::Milliseconds(20), absl::Milliseconds(200));
}

std::optional<v1::StallReport> StallDetector::FindStall(absl::Time now,
                                                        const std::vector<RankReport>& ranks,
                                                        bool* undecided) const {
  *undecided = false;
  // The oldest wait in the global set, among this generation's reports.
  const RankReport* first = nullptr;
  for (const RankReport& r : ranks) {
    if (!InGlobalSet(r.activity) || r.reported_at < generation_at_) continue;
    if (WaitSince(r) < generation_at_ - kGenerationSlack) continue;
    if (first == nullptr || WaitSince(r) < WaitSince(*first)) first = &r;
  }
  if (first == nullptr) return std::nullopt;
  const absl::Time since = WaitSince(*first);
  if (now - since < settings_.warning) return std::nullopt;

  v1::StallReport report;
  *report.mutable_collective() = first->activity->waiting();
  report.mutable_collective()->set_since_unix(Unix(since));
  report.mutable_collective()->set_waited_seconds(absl::ToDoubleSeconds(now - since));
  std::vector<const RankReport*> waiters;
  std::vector<const RankReport*> missing;
  for (const RankReport& r : ranks) {
    if (WaitsIn(r, report.collective()) && r.reported_at >= generation_at_) {
      waiters.push_back(&r);
      report.add_waiting_ranks(r.rank);
      continue;
    }
    // Not in it as of its last report: that report must be recent enough
    // to say it was still not there well after the others began waiting.
    if (r.activity != nullptr && r.reported_at < since + settings_.warning / 2) {
      *undecided = true;
      return std::nullopt;
    }
    missing.push_back(&r);
  }
  if (!missing.empty()) {
    // A link that stalls one way can look like a missing rank: the sender's
    // end received the waiter's data, completed the collective and waits in
    // its next one for the waiter's, while the waiter still waits for the
    // sender's. Two ranks each blocked on the other's transfers are a link.
    for (const RankReport* w : waiters) {
      const int peer = FirstPeer(*w);
      for (const RankReport* m : missing) {
        if (m->rank != peer || !InGlobalSet(m->activity) || FirstPeer(*m) != w->rank) continue;
        const absl::Time waiter_since = PeerWaitSince(*w);
        if (now - waiter_since < settings_.warning) {
          *undecided = true;  // the waiter's transfers may still move
          return std::nullopt;
        }
        SetLink(report, *w, *m, waiter_since, now);
        return report;
      }
    }
    report.set_kind("missing");
    for (const RankReport* r : missing) *report.add_culprits() = CulpritOf(*r, now);
    return report;
  }
  // Every rank submitted it. The transfer that stalls is the oldest wait for
  // a peer's data: the waits that follow it (ranks waiting for a rank that
  // itself waits) began later. Its two ends are named.
  std::map<int, const RankReport*> by_rank;
  for (const RankReport& r : ranks) by_rank[r.rank] = &r;
  const RankReport* waiter = nullptr;
  int awaited = -1;
  absl::Time waiter_since;
  for (const RankReport* w : waiters) {
    for (int peer : w->activity->waiting_on_ranks()) {
      if (by_rank.count(peer) == 0 || peer == w->rank) continue;
      const absl::Time peer_since = PeerWaitSince(*w);
      if (waiter == nullptr || peer_since < waiter_since) {
        waiter = w;
        awaited = peer;
        waiter_since = peer_since;
      }
      break;  // its first: the one its transport is blocked on
    }
  }
  if (waiter != nullptr) {
    if (now - waiter_since < settings_.warning) {
      // Every wait for a peer is younger than the warning time: the
      // collective's transfers still move.
      *undecided = true;
      return std::nullopt;
    }
    SetLink(report, *waiter, *by_rank.at(awaited), waiter_since, now);
    return report;
  }
  report.set_kind("unknown");
  for (const RankReport* w : waiters) *report.add_culprits() = CulpritOf(*w, now);
  return report;
}

StallDetector::Verdict StallDetector::Check(absl::Time now, const std::vector<RankReport>& ranks) {
  Verdict verdict;
  JudgeStragglers(now, ranks, verdict);
  if (!settings_.enabled) return verdict;
  if (current_.has_value()) {
    // It lasts while its first waiter still waits in it.
    bool lasts = false;
    const absl::Time since = absl::UnixEpoch() + absl::Seconds(current_->collective().since_unix());
    for (const RankReport& r : ranks) {
      if (WaitsIn(r, current_->collective()) && WaitSince(r) <= since + kSameWait) lasts = true;
    }
    if (!lasts) {
      verdict.cleared = std::move(current_);
      current_.reset();
      verdict.cleared->mutable_collective()->set_waited_seconds(absl::ToDoubleSeconds(now - since));
    } else {
      current_->mutable_collective()->set_waited_seconds(absl::ToDoubleSeconds(now - since));
      if (!current_->evicted() && settings_.act_after != absl::InfiniteDuration() &&
          now - since >= settings_.act_after) {
        current_->set_evicted(true);
        verdict.act = current_;
      }
      return verdict;
    }
  }
  bool undecided = false;
  std::optional<v1::StallReport> found = FindStall(now, ranks, &undecided);
  if (!found.has_value()) return verdict;
  found->set_named_unix(Unix(now));
  const absl::Time since = absl::UnixEpoch() + absl::Seconds(found->collective().since_unix());
  if (settings_.act_after != absl::InfiniteDuration()) {
    found->set_evict_unix(Unix(since + settings_.act_after));
  }
  current_ = std::move(found);
  verdict.named = current_;
  if (settings_.act_after != absl::InfiniteDuration() && now - since >= settings_.act_after) {
    current_->set_evicted(true);
    verdict.act = current_;
  }
  return verdict;
}

void StallDetector::JudgeStragglers(absl::Time now, const std::vector<RankReport>& ranks,
                                    Verdict& verdict) {
  straggling_.clear();
  struct Rate {
    const RankReport* r;
    double compute;
    double wait;
    double step;
  };
  std::vector<Rate> rates;
  for (const RankReport& r : ranks) {
    if (r.activity == nullptr || r.reported_at < generation_at_ ||
        r.activity->step_seconds() <= 0) {
      continue;
    }
    const double step = r.activity->step_seconds();
    const double wait = std::min(r.activity->step_wait_seconds(), step);
    rates.push_back({&r, step - wait, wait, step});
  }
  if (rates.size() < 2) {
    slow_since_.clear();
    return;
  }
  std::vector<double> steps;
  for (const Rate& x : rates) steps.push_back(x.step);
  const absl::Duration window = std::max(kStragglerWindow, absl::Seconds(10 * Median(steps)));
  std::set<int64_t> slow_now;
  for (const Rate& x : rates) {
    std::vector<double> computes, waits;
    for (const Rate& y : rates) {
      if (y.r == x.r) continue;
      computes.push_back(y.compute);
      waits.push_back(y.wait);
    }
    const double others_compute = std::max(Median(computes), 1e-3);
    Straggling s;
    s.lost_seconds_per_step = std::max(0.0, Median(waits) - x.wait);
    s.straggler = x.compute > kShownFactor * others_compute && s.lost_seconds_per_step > 1e-3;
    straggling_[x.r->worker_id] = s;
    if (settings_.evict_stragglers > 0 && elastic_ &&
        x.compute > settings_.evict_stragglers * others_compute) {
      slow_now.insert(x.r->worker_id);
      auto [it, fresh] = slow_since_.emplace(x.r->worker_id, now);
      if (now - it->second >= window && straggler_evicted_.insert(x.r->worker_id).second) {
        v1::StallCulprit c = CulpritOf(*x.r, now);
        c.set_last_did(absl::StrCat(
            c.last_did(), "; computes ",
            absl::FormatDuration(absl::Milliseconds(static_cast<int64_t>(x.compute * 1000))),
            " per step against the others' median ",
            absl::FormatDuration(absl::Milliseconds(static_cast<int64_t>(others_compute * 1000))),
            " for ", absl::FormatDuration(now - it->second)));
        verdict.evict_stragglers.push_back(std::move(c));
      }
    }
  }
  for (auto it = slow_since_.begin(); it != slow_since_.end();) {
    it = slow_now.count(it->first) ? std::next(it) : slow_since_.erase(it);
  }
}

}  // namespace horovodd::daemon
