// The generations of one job: which workers each one has (in rank order),
// which has formed (every member called Rendezvous for it: ready), the ranks
// of its members, and, while a running job grows, the new workers
// ("joiners") the others wait for before they hear of it. JobDriver decides
// when to plan and what to tell whom; this class keeps the books and answers
// the rendezvous calls.
//
// Threading: owned by one JobDriver and used only on its loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/membership/membership.h"
#include "daemon/workers/worker_table.h"
#include "discovery/host_manager.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// The address a worker on `host` binds its rings to: its IPv4 address
// (127.0.0.1 for localhost), or `host` itself when it does not resolve.
// May look the name up (getaddrinfo): keep it off the loop (BindAddresses).
std::string BindAddressFor(const std::string& host);

// BindAddressFor each host, looked up once and kept: a generation's answers
// name every member's address, and a name lookup may wait on DNS. The
// launches of workers on other hosts look theirs up on the launch pool
// (WorkerStarter), so the answers on the loop find them here.
//
// Thread-safe.
class BindAddresses {
 public:
  using Resolver = std::function<std::string(const std::string& host)>;
  explicit BindAddresses(Resolver resolve = BindAddressFor) : resolve_(std::move(resolve)) {}

  std::string For(const std::string& host) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Resolver resolve_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> addresses_ ABSL_GUARDED_BY(mu_);
};

class GenerationPlanner {
 public:
  // A job has as many workers as the usable slots allow, up to --max-np (0: no
  // limit), from its first generation on, as in Horovod (-np is only how many
  // slots must be there before it starts: JobDriver waits for those).
  // `hot_spares` spares are kept beside it when slots allow (PlanGeneration);
  // `first_size` (-np) is the size its first generation keeps to before any
  // slot goes to a spare.
  explicit GenerationPlanner(int max_np, int hot_spares = 0, int first_size = 0)
      : max_np_(max_np), hot_spares_(hot_spares), first_size_(first_size) {}

  int64_t generation() const { return generation_; }              // newest planned
  int64_t ready_generation() const { return ready_generation_; }  // newest formed
  bool rendezvous_open() const { return generation_ != ready_generation_; }
  const std::vector<int64_t>& members() const { return members_; }  // of generation()
  const std::vector<int64_t>& ready_members() const { return ready_members_; }
  // When the members were told of generation() (its elastic timeout counts from here).
  absl::Time planned_at() const { return planned_at_; }

  // O(1): every rendezvous call asks (a scan would make a generation's calls O(N^2)).
  bool IsMember(int64_t id) const;
  // Whether `id` is held: a worker of the ready generation that generation()
  // leaves out because its host is blacklisted. It hears that it leaves only
  // once generation() forms (TakeHeld): until then every plan counts it among
  // the survivors again, so that hosts blacklisted one failure after another
  // while one reset forms are judged together, and when every survivor is on
  // a blacklisted host they all stay (PlanGeneration), not only the last.
  bool Holds(int64_t id) const;
  // The held workers, once generation() formed: they leave now. Clears them.
  std::vector<int64_t> TakeHeld();
  // Rank in the ready generation; -1 when not in it. O(1).
  int RankOf(int64_t id) const;
  // Whether member `id` knows of generation() (or will at once: a joiner).
  bool Told(int64_t id) const;

  // The next generation for `workers` on `hosts` as they are at `now`, from
  // the members of generation() and the held workers, in rank order, and
  // the job's spares (IsSpare), ready ones first.
  Plan Next(const WorkerTable& workers, const discovery::HostManager& hosts, absl::Time now) const;
  // Whether `plan` (from Next) is generation() again: the same members in
  // the same order, no new worker, and only held workers left out.
  bool Unchanged(const Plan& plan) const;
  // `plan` is generation() + 1 from `now` on: its survivors and the spares
  // it promotes are the members (workers it starts join with AddMember); the
  // workers it removes from blacklisted hosts are held (Holds).
  void Begin(const Plan& plan, absl::Time now);
  void AddMember(int64_t id) {
    members_.push_back(id);
    member_ids_.insert(id);
  }
  // A planned member that never started leaves the plan.
  void RemoveMember(int64_t id);

  // A job taken back after a daemon restart. With `ready_members` (in rank
  // order), `ready` is the ready generation (ranks as MarkReady gives them)
  // and the next one planned is numbered above `planned` (the newest an
  // earlier run had announced, so no worker hears a number twice). Without,
  // nothing had formed yet: `planned` is planned with `planned_members`.
  void Restore(int64_t ready, std::vector<int64_t> ready_members, int64_t planned,
               std::vector<int64_t> planned_members, const WorkerTable& workers, absl::Time now);

  // The members from `first_new` on join a running job: the others hear of
  // the generation once every joiner waits for it (see JoinersWait).
  void ExpectJoiners(size_t first_new);
  void ForgetJoiners();
  bool joiners_pending() const { return joiners_pending_; }
  // True once every joiner still planned waits for generation(): the
  // joiners are forgotten and the others are to be told from `now` on.
  bool JoinersWait(const WorkerTable& workers, absl::Time now);

  // Whether every member waits for generation() (O(N) per generation over
  // all calls, not O(N^2): a scan resumes where the last one stopped).
  bool AllWaiting(const WorkerTable& workers);
  // generation() formed: it is the ready one, its members get ranks.
  void MarkReady(const WorkerTable& workers);
  // The answer to `w`'s rendezvous call for the ready generation, where `w`
  // has `rank` there; sets what `w` learns from it. Its bind address is
  // bind_addresses()'s.
  v1::RendezvousResponse ReadyAnswer(Worker& w, int rank) const;
  // The answer to a worker that is no longer part of the job.
  v1::RendezvousResponse RemovedAnswer() const;
  // What the members hear on their Attach streams when generation() is
  // planned: its number, and whether to abort the collectives they are in.
  v1::DaemonMessage Announcement(bool abort_collectives) const;
  // `w` as events name it: "worker 3 (rank 1, a, pid 9)", with its rank in
  // the ready generation if it has one.
  std::string Describe(const Worker& w) const;
  // The job's bind addresses (ReadyAnswer's; its launches fill them).
  BindAddresses& bind_addresses() { return bind_addresses_; }

 private:
  // member_ids_ from members_ anew.
  void IndexMembers();

  const int max_np_;
  const int hot_spares_;
  const int first_size_;
  int64_t generation_ = 0;
  int64_t ready_generation_ = 0;
  std::vector<int64_t> members_;
  absl::flat_hash_set<int64_t> member_ids_;  // members_, for IsMember
  // members_[0, rendezvous_scan_) were seen waiting for generation_; reset
  // whenever members_ changes.
  size_t rendezvous_scan_ = 0;
  std::vector<int64_t> joiners_;
  bool joiners_pending_ = false;
  std::vector<int64_t> held_;  // see Holds
  std::vector<int64_t> ready_members_;
  absl::flat_hash_map<int64_t, int> ready_ranks_;  // ready_members_' ranks, for RankOf
  std::vector<RankInfo> rank_infos_;               // of ready_members_
  // ready_generation_ is generation shrinks_generation_ without the workers
  // of excluded_ranks_ there (0: it is not); see RendezvousResponse.
  int64_t shrinks_generation_ = 0;
  std::vector<int> excluded_ranks_;
  absl::Time planned_at_;
  int64_t generation_floor_ = 0;  // Begin numbers the next one above it (Restore)
  mutable BindAddresses bind_addresses_;
};

// Whether `w` is a hot spare: started, outside every generation, waiting
// for one to need it.
inline bool IsSpare(const Worker& w) {
  return w.state == v1::WORKER_SPARE_STARTING || w.state == v1::WORKER_SPARE_READY;
}

// Why `w`, whom `plan` removes, leaves the job, for its event ("host a is
// drained"), from `hosts` as they are at `now`.
std::string WhyLeaving(const Plan& plan, const Worker& w, const discovery::HostManager& hosts,
                       absl::Time now);

}  // namespace horovodd::daemon
