#include "worker_runtime/engine/engine_stall.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker_runtime/engine/engine_request.h"

namespace horovodd::internal {
namespace {

absl::StatusOr<absl::Duration> SecondsEnv(const char* name, absl::Duration fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !(seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a non-negative number of seconds, got '", text, "'"));
  }
  return absl::Seconds(seconds);
}

bool Truthy(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return false;
  const std::string value = text;
  return !value.empty() && value != "0" && value != "false" && value != "False";
}

}  // namespace

absl::StatusOr<StallOptions> StallOptions::FromEnvironment() {
  StallOptions options;
  options.enabled = !Truthy("HOROVOD_STALL_CHECK_DISABLE");
  absl::StatusOr<absl::Duration> check =
      SecondsEnv("HOROVOD_STALL_CHECK_TIME_SECONDS", options.check_time);
  if (!check.ok()) return check.status();
  absl::StatusOr<absl::Duration> shutdown =
      SecondsEnv("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", options.shutdown_time);
  if (!shutdown.ok()) return shutdown.status();
  options.check_time = *check;
  options.shutdown_time = *shutdown;
  // Under a daemon that acts on stalls, the ranks that wait are the
  // innocent ones: it evicts the ranks they wait for, or fails the job naming
  // them. Shutting down here would punish the waiters instead.
  if (Truthy("HOROVODD_STALL_SHUTDOWN_BY_DAEMON")) options.shutdown_time = absl::ZeroDuration();
  if (options.check_time <= absl::ZeroDuration()) options.enabled = false;
  return options;
}

void StallInspector::RoundStarted(const std::vector<std::string>& pending, int self, int ranks) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  // Every round, with every pending name: the nodes of names still pending
  // move over (no allocation in a steady loop); new names are added.
  std::map<std::string, absl::Time> first;
  for (const std::string& name : pending) {
    auto node = first_pending_.extract(name);
    if (node.empty()) {
      first.emplace(name, now);
    } else {
      first.insert(std::move(node));
    }
  }
  first_pending_ = std::move(first);
  round_since_ = now;
  round_pending_ = pending;
  round_missing_.assign(ranks, true);
  if (self >= 0 && self < ranks) round_missing_[self] = false;
}

void StallInspector::PeerArrived(int rank) {
  absl::MutexLock lock(&mu_);
  if (rank >= 0 && rank < static_cast<int>(round_missing_.size())) round_missing_[rank] = false;
}

void StallInspector::RoundDecided(const std::map<std::string, std::vector<int>>& waiting) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  round_since_.reset();
  round_missing_.clear();
  std::map<std::string, Waiting> next;
  for (const auto& [name, missing] : waiting) {
    auto first = first_pending_.find(name);
    auto old = waiting_.find(name);
    absl::Time since = old != waiting_.end() ? old->second.since : now;
    if (first != first_pending_.end() && first->second < since) since = first->second;
    next.emplace(name, Waiting{since, missing});
  }
  waiting_ = std::move(next);
}

void StallInspector::Reset() {
  absl::MutexLock lock(&mu_);
  waiting_.clear();
  first_pending_.clear();
  round_since_.reset();
  round_pending_.clear();
  round_missing_.clear();
}

StallInspector::Verdict StallInspector::Check(absl::Time now) {
  absl::MutexLock lock(&mu_);
  Verdict verdict;
  if (!options_.enabled) return verdict;
  std::map<int, std::set<std::string>> missing_by_rank;
  absl::Duration longest = absl::ZeroDuration();
  auto add = [&](const std::string& name, absl::Time since, const auto& ranks) {
    const absl::Duration waited = now - since;
    if (waited < options_.check_time) return;
    if (waited > longest) longest = waited;
    for (int rank : ranks) missing_by_rank[rank].insert(UserFacingName(name));
  };
  for (const auto& [name, waiting] : waiting_) {
    // Names other ranks have pending that this rank lacks are theirs to report.
    if (first_pending_.count(name) == 0) continue;
    add(name, waiting.since, waiting.missing);
  }
  std::vector<int> missing_peers;
  for (int r = 0; r < static_cast<int>(round_missing_.size()); ++r) {
    if (round_missing_[r]) missing_peers.push_back(r);
  }
  if (round_since_.has_value() && !missing_peers.empty()) {
    for (const std::string& name : round_pending_) {
      auto first = first_pending_.find(name);
      add(name, first == first_pending_.end() ? *round_since_ : first->second, missing_peers);
    }
  }
  std::string missing;
  for (const auto& [rank, names] : missing_by_rank) {
    if (names.empty()) continue;
    absl::StrAppend(&missing, "\n", rank, ": [", absl::StrJoin(names, ", "), "]");
  }
  if (missing.empty()) return verdict;  // never a warning that names nobody
  const double seconds = absl::ToDoubleSeconds(options_.check_time);
  if (now - last_warning_ >= options_.check_time) {
    last_warning_ = now;
    verdict.warning = absl::StrCat(
        "One or more tensors were submitted to be reduced, gathered or broadcasted by subset "
        "of ranks and are waiting for remainder of ranks for more than ",
        seconds,
        " seconds. This may indicate that different ranks are trying to submit different "
        "tensors or that only subset of ranks is submitting tensors, which will cause "
        "deadlock.\nMissing ranks:",
        missing);
  }
  if (options_.shutdown_time > absl::ZeroDuration() && longest >= options_.shutdown_time) {
    verdict.shutdown = absl::StrCat(
        "the stall check shut the job down: tensors waited more than ",
        absl::ToDoubleSeconds(options_.shutdown_time),
        " seconds (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS) for ranks that did not submit them. "
        "Missing ranks:",
        missing);
  }
  return verdict;
}

}  // namespace horovodd::internal
