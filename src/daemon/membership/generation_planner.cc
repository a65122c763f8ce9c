#include "daemon/membership/generation_planner.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace horovodd::daemon {

std::string BindAddressFor(const std::string& host) {
  if (host == "localhost") return "127.0.0.1";
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* result = nullptr;
  std::string out = host;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) == 0 && result != nullptr) {
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(result->ai_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf))) out = buf;
    freeaddrinfo(result);
  }
  return out;
}

std::string BindAddresses::For(const std::string& host) {
  {
    absl::MutexLock lock(&mu_);
    auto it = addresses_.find(host);
    if (it != addresses_.end()) return it->second;
  }
  // Outside the lock: two first lookups of one host may both resolve it.
  std::string address = resolve_(host);
  absl::MutexLock lock(&mu_);
  return addresses_.try_emplace(host, std::move(address)).first->second;
}

bool GenerationPlanner::IsMember(int64_t id) const { return member_ids_.contains(id); }

void GenerationPlanner::IndexMembers() {
  member_ids_.clear();
  member_ids_.reserve(members_.size());
  member_ids_.insert(members_.begin(), members_.end());
}

bool GenerationPlanner::Holds(int64_t id) const {
  return std::find(held_.begin(), held_.end(), id) != held_.end();
}

std::vector<int64_t> GenerationPlanner::TakeHeld() {
  std::vector<int64_t> held;
  held.swap(held_);
  return held;
}

int GenerationPlanner::RankOf(int64_t id) const {
  auto it = ready_ranks_.find(id);
  return it == ready_ranks_.end() ? -1 : it->second;
}

bool GenerationPlanner::Told(int64_t id) const {
  return !joiners_pending_ || std::find(joiners_.begin(), joiners_.end(), id) != joiners_.end();
}

Plan GenerationPlanner::Next(const WorkerTable& workers, const discovery::HostManager& hosts,
                             absl::Time now) const {
  PlanInput input;
  std::vector<int64_t> current = members_;
  if (!held_.empty()) {
    // The held workers back among the members, in the ready generation's
    // rank order; workers started since come after them.
    current.clear();
    const absl::flat_hash_set<int64_t> held(held_.begin(), held_.end());
    absl::flat_hash_set<int64_t> listed;
    for (int64_t id : ready_members_) {
      if (IsMember(id) || held.contains(id)) {
        current.push_back(id);
        listed.insert(id);
      }
    }
    for (int64_t id : members_) {
      if (listed.insert(id).second) current.push_back(id);
    }
    for (int64_t id : held_) {
      if (listed.insert(id).second) current.push_back(id);
    }
  }
  for (int64_t id : current) {
    const Worker& w = workers.at(id);
    input.current.push_back({id, w.host});
    if (w.state == v1::WORKER_FAILED || w.gone()) input.lost.insert(id);
  }
  for (const auto& h : hosts.Hosts(now)) {
    // Drained hosts keep no workers; blacklisted ones (in cooldown) keep them
    // only when nobody else would survive (PlanGeneration).
    if (h.state == discovery::HostState::kUsable || h.state == discovery::HostState::kCooldown) {
      input.discovered[h.host] = h.slots;
    }
    if (h.state == discovery::HostState::kCooldown) input.blacklisted.insert(h.host);
  }
  for (const auto& h : hosts.UsableHosts(now)) input.usable.emplace_back(h.host, h.slots);
  input.max_size = max_np_;
  input.hot_spares = hot_spares_;
  input.keep_size = generation_ == 0 ? first_size_ : static_cast<int>(current.size());
  for (bool ready : {true, false}) {
    for (const auto& [id, w] : workers) {
      if (IsSpare(w) && !w.gone() && w.lost_reason.empty() &&
          (w.state == v1::WORKER_SPARE_READY) == ready) {
        input.spares.push_back({id, w.host});
      }
    }
  }
  return PlanGeneration(input);
}

bool GenerationPlanner::Unchanged(const Plan& plan) const {
  if (!plan.new_hosts.empty() || !plan.promoted.empty() ||
      plan.survivors.size() != members_.size()) {
    return false;
  }
  for (size_t i = 0; i < members_.size(); ++i) {
    if (plan.survivors[i].worker_id != members_[i]) return false;
  }
  return std::all_of(plan.removed.begin(), plan.removed.end(),
                     [this](int64_t id) { return Holds(id); });
}

void GenerationPlanner::Begin(const Plan& plan, absl::Time now) {
  generation_ = std::max(generation_, generation_floor_) + 1;
  planned_at_ = now;
  members_.clear();
  rendezvous_scan_ = 0;
  for (const auto& m : plan.survivors) members_.push_back(m.worker_id);
  for (const auto& m : plan.promoted) members_.push_back(m.worker_id);
  IndexMembers();
  held_ = plan.left_blacklisted;
}

void GenerationPlanner::Restore(int64_t ready, std::vector<int64_t> ready_members, int64_t planned,
                                std::vector<int64_t> planned_members, const WorkerTable& workers,
                                absl::Time now) {
  rendezvous_scan_ = 0;
  ForgetJoiners();
  planned_at_ = now;
  ready_members_.clear();  // nothing to shrink from
  ready_ranks_.clear();
  if (ready_members.empty()) {
    generation_ = planned;
    members_ = std::move(planned_members);
    IndexMembers();
    return;
  }
  generation_ = ready;
  generation_floor_ = std::max(ready, planned);
  members_ = std::move(ready_members);
  IndexMembers();
  MarkReady(workers);
}

void GenerationPlanner::RemoveMember(int64_t id) {
  members_.erase(std::remove(members_.begin(), members_.end(), id), members_.end());
  member_ids_.erase(id);
  rendezvous_scan_ = 0;
}

void GenerationPlanner::ExpectJoiners(size_t first_new) {
  HVDD_CHECK_LE(first_new, members_.size());
  joiners_.insert(joiners_.end(), members_.begin() + static_cast<std::ptrdiff_t>(first_new),
                  members_.end());
  joiners_pending_ = true;
}

void GenerationPlanner::ForgetJoiners() {
  joiners_pending_ = false;
  joiners_.clear();
}

bool GenerationPlanner::JoinersWait(const WorkerTable& workers, absl::Time now) {
  if (!joiners_pending_) return false;
  for (int64_t id : joiners_) {
    const Worker* w = workers.Find(id);
    // One that left the plan (its launch failed) is not waited for.
    if (w == nullptr || !IsMember(id)) continue;
    if (!w->waiting || w->after_generation >= generation_) return false;
  }
  ForgetJoiners();
  planned_at_ = now;
  return true;
}

bool GenerationPlanner::AllWaiting(const WorkerTable& workers) {
  auto waiting_for_this = [&](int64_t id) {
    const Worker& w = workers.at(id);
    return w.waiting && w.after_generation < generation_;
  };
  for (; rendezvous_scan_ < members_.size(); ++rendezvous_scan_) {
    if (!waiting_for_this(members_[rendezvous_scan_])) return false;
  }
  // Once per complete scan: someone seen waiting may have exited since.
  for (int64_t id : members_) {
    if (!waiting_for_this(id)) {
      rendezvous_scan_ = 0;
      return false;
    }
  }
  return true;
}

void GenerationPlanner::MarkReady(const WorkerTable& workers) {
  // Only workers left since the last ready generation: they may shrink its
  // communicators (a worker of it that missed some generations in between
  // still has them).
  std::optional<std::vector<int>> removed = RemovedRanks(ready_members_, members_);
  shrinks_generation_ = removed.has_value() ? ready_generation_ : 0;
  excluded_ranks_ = removed.value_or(std::vector<int>());
  ready_generation_ = generation_;
  ready_members_ = members_;
  ready_ranks_.clear();
  ready_ranks_.reserve(ready_members_.size());
  for (size_t rank = 0; rank < ready_members_.size(); ++rank) {
    ready_ranks_[ready_members_[rank]] = static_cast<int>(rank);
  }
  std::vector<std::string> hosts;
  hosts.reserve(members_.size());
  for (int64_t id : members_) hosts.push_back(workers.at(id).host);
  rank_infos_ = AssignRanks(hosts);
}

v1::RendezvousResponse GenerationPlanner::ReadyAnswer(Worker& w, int rank) const {
  const RankInfo& info = rank_infos_.at(rank);
  v1::RendezvousResponse response;
  response.set_generation(ready_generation_);
  response.set_rank(info.rank);
  response.set_size(info.size);
  response.set_local_rank(info.local_rank);
  response.set_local_size(info.local_size);
  response.set_cross_rank(info.cross_rank);
  response.set_cross_size(info.cross_size);
  // O(removed workers), never O(size): the answers of one generation add up
  // to O(size) (bench/README.md, daemon scale).
  if (shrinks_generation_ != 0) {
    response.set_shrinks_generation(shrinks_generation_);
    response.mutable_excluded_ranks()->Add(excluded_ranks_.begin(), excluded_ranks_.end());
  }
  response.set_bind_address(bind_addresses_.For(w.host));
  if (w.joined_generation != ready_generation_) w.generations_joined++;
  w.joined_generation = ready_generation_;
  w.state = v1::WORKER_RUNNING;
  w.rank->store(rank);
  return response;
}

v1::RendezvousResponse GenerationPlanner::RemovedAnswer() const {
  v1::RendezvousResponse response;
  response.set_generation(generation_);
  response.set_removed(true);
  return response;
}

v1::DaemonMessage GenerationPlanner::Announcement(bool abort_collectives) const {
  v1::DaemonMessage message;
  message.set_generation(generation_);
  message.set_abort(abort_collectives);
  return message;
}

std::string GenerationPlanner::Describe(const Worker& w) const {
  int rank = RankOf(w.id);
  return absl::StrCat(IsSpare(w) ? "spare " : "worker ", w.id, " (",
                      rank >= 0 ? absl::StrCat("rank ", rank, ", ") : "", w.host,
                      w.pid != 0 ? absl::StrCat(", pid ", w.pid) : "", ")");
}

std::string WhyLeaving(const Plan& plan, const Worker& w, const discovery::HostManager& hosts,
                       absl::Time now) {
  if (std::find(plan.left_blacklisted.begin(), plan.left_blacklisted.end(), w.id) !=
      plan.left_blacklisted.end()) {
    return absl::StrCat("host ", w.host, " is blacklisted");
  }
  for (const auto& h : hosts.Hosts(now)) {
    if (h.host != w.host) continue;
    if (h.state == discovery::HostState::kDrained) {
      return absl::StrCat("host ", w.host, " is drained");
    }
    if (h.state == discovery::HostState::kLost) {
      return absl::StrCat("host ", w.host, " is no longer discovered");
    }
  }
  return "its slot is gone";
}

}  // namespace horovodd::daemon
