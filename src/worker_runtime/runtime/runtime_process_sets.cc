#include "worker_runtime/runtime/runtime.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker_runtime/comm_factory/comm_factory.h"
#include "worker_runtime/daemon_client/daemon_kv_store.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/runtime/engine_api.h"
#include "worker_runtime/runtime/environment.h"

namespace horovodd::internal {

// ---------------------------------------------------------------------------
// Process sets
// ---------------------------------------------------------------------------

namespace {

bool DynamicProcessSetsEnabled() {
  const std::string value = OptionalEnv("HOROVOD_DYNAMIC_PROCESS_SETS");
  return !value.empty() && value != "0" && value != "false" && value != "False";
}

std::string RanksText(const std::vector<int>& ranks) {
  std::vector<std::string> texts;
  for (int rank : ranks) texts.push_back(std::to_string(rank));
  return absl::StrCat("[", absl::StrJoin(texts, ", "), "]");
}

}  // namespace

absl::StatusOr<ProcessSetView> Runtime::ProcessSetFor(int process_set_id) {
  ProcessSetView view;
  view.id = process_set_id;
  if (process_set_id == 0) {
    view.engine = engine_.get();
    // Every enqueued collective asks: one allocation, not one per growth.
    view.ranks.resize(std::max(assignment_.size, 0));
    std::iota(view.ranks.begin(), view.ranks.end(), 0);
    view.set_rank = assignment_.rank;
    return view;
  }
  absl::MutexLock lock(&sets_mu_);
  auto it = sets_.find(process_set_id);
  if (it == sets_.end()) {
    return absl::NotFoundError(absl::StrCat("process set ", process_set_id, " does not exist"));
  }
  if (it->second.set_rank < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", assignment_.rank, " is not a member of process set ", process_set_id,
                     " (ranks ", RanksText(it->second.ranks), ")"));
  }
  view.engine = it->second.engine.get();
  view.keep_alive = it->second.engine;
  view.ranks = it->second.ranks;
  view.set_rank = it->second.set_rank;
  return view;
}

absl::StatusOr<int> Runtime::AddProcessSet(std::vector<int> ranks, bool at_init) {
  const std::string label = absl::StrCat("add_process_set ", RanksText(ranks));
  if (!at_init && !DynamicProcessSetsEnabled()) {
    return absl::FailedPreconditionError(
        absl::StrCat(label,
                     ": adding process sets at run time needs HOROVOD_DYNAMIC_PROCESS_SETS=1 "
                     "(as in Horovod), or pass them to init"));
  }
  if (ranks.empty()) return absl::InvalidArgumentError(absl::StrCat(label, ": no ranks"));
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= assignment_.size) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": rank ", sorted[i], " is out of range for ", assignment_.size, " ranks"));
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": rank ", sorted[i], " is repeated"));
    }
  }
  {
    absl::MutexLock lock(&sets_mu_);
    for (const auto& [id, set] : sets_) {
      if (set.ranks == sorted) {
        return absl::InvalidArgumentError(
            absl::StrCat(label, ": process set ", id, " already has these ranks"));
      }
    }
  }
  // Collective over every rank: the descriptor carries the ranks, so ranks
  // that disagree fail together (a conflict) instead of building different
  // sets.
  HVDD_ASSIGN_OR_RETURN(
      Handle agreed,
      EnqueueOpaque(*this, SyncName("add_process_set", ""), absl::StrCat("add_process_set ",
                                                                          RanksText(sorted)),
                    /*tensors=*/{}, [](std::optional<Tensor>*) { return absl::OkStatus(); },
                    /*urgent=*/true, /*process_set_id=*/0));
  HVDD_RETURN_IF_ERROR(agreed.Wait());

  ProcessSet set;
  set.ranks = sorted;
  auto mine = std::find(sorted.begin(), sorted.end(), assignment_.rank);
  set.set_rank = mine == sorted.end() ? -1 : static_cast<int>(mine - sorted.begin());
  int id = 0;
  {
    absl::MutexLock lock(&sets_mu_);
    id = next_set_id_++;  // every rank counts alike, members or not
  }
  if (set.set_rank >= 0) {
    // The set's ranks on each host share memory as the global ring's do
    // (every member sees the same host_of_rank_, so all or none run this).
    std::optional<LocalOptions> local;
    if (!host_of_rank_.empty()) local = SubsetPlaces(host_of_rank_, sorted, set.set_rank, local_);
    RingOptions ring_options;
    ring_options.generation = assignment_.generation;
    ring_options.rank = set.set_rank;
    ring_options.size = static_cast<int>(sorted.size());
    ring_options.bind_address = bind_address_;
    ring_options.timeout = ring_timeout_;
    ring_options.key_scope = absl::StrCat(key_scope_, ".ps", id);
    // As the global ring's: no pair where the set's ranks all share one host.
    ring_options.eager_pairs = !local.has_value() || local->local_size != ring_options.size;
    RingResult result = ConnectRingThroughDaemon(*client_, ring_options);
    if (!result.ring.ok()) {
      return absl::UnavailableError(
          absl::StrCat(label, ": its ring did not connect: ", result.ring.status().message()));
    }
    auto ring = std::make_shared<GlooCommunicator>(*std::move(result.ring));
    std::shared_ptr<Communicator> comm = ring;
    if (local.has_value()) {
      absl::StatusOr<std::shared_ptr<Communicator>> chosen =
          ConnectCommunicator(std::move(ring), *local);
      if (!chosen.ok()) {
        reaper_.Retire(std::move(comm));
        return absl::UnavailableError(absl::StrCat(
            label, ": its shared memory could not be set up: ", chosen.status().message()));
      }
      comm = *std::move(chosen);
    }
    {
      absl::MutexLock lock(&comm_mu_);
      set_comms_[id] = std::move(comm);
    }
    set.engine = std::make_shared<Engine>(engine_->options(), stall_, ActivitySink{activity_, id});
    set.engine->Attach(
        assignment_.generation, [this, id](CommunicatorOp op) { return RunCollective(id, op); },
        [this, id] {
          absl::MutexLock lock(&comm_mu_);
          if (auto it = set_comms_.find(id); it != set_comms_.end()) it->second->Abort();
        });
  }
  absl::MutexLock lock(&sets_mu_);
  sets_.emplace(id, std::move(set));
  return id;
}

absl::Status Runtime::RemoveProcessSet(int process_set_id) {
  if (process_set_id == 0) {
    return absl::InvalidArgumentError("the global process set (0) cannot be removed");
  }
  {
    absl::MutexLock lock(&sets_mu_);
    if (sets_.count(process_set_id) == 0) {
      return absl::NotFoundError(absl::StrCat("process set ", process_set_id, " does not exist"));
    }
  }
  HVDD_ASSIGN_OR_RETURN(
      Handle agreed,
      EnqueueOpaque(*this, SyncName("remove_process_set", ""),
                    absl::StrCat("remove_process_set ", process_set_id), /*tensors=*/{},
                    [](std::optional<Tensor>*) { return absl::OkStatus(); }, /*urgent=*/true,
                    /*process_set_id=*/0));
  HVDD_RETURN_IF_ERROR(agreed.Wait());
  ProcessSet set;
  {
    absl::MutexLock lock(&sets_mu_);
    auto it = sets_.find(process_set_id);
    if (it == sets_.end()) return absl::OkStatus();
    set = std::move(it->second);
    sets_.erase(it);
  }
  std::shared_ptr<Communicator> comm;
  {
    absl::MutexLock lock(&comm_mu_);
    if (auto it = set_comms_.find(process_set_id); it != set_comms_.end()) {
      comm = std::move(it->second);
      set_comms_.erase(it);
    }
  }
  if (set.engine != nullptr) {
    set.engine->Detach(
        absl::AbortedError(absl::StrCat("process set ", process_set_id, " was removed")), [comm] {
          if (comm != nullptr) comm->Abort();
        });
  }
  reaper_.Retire(std::move(comm));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> Runtime::ProcessSetRanks(int process_set_id) const {
  if (process_set_id == 0) {
    std::vector<int> ranks;
    for (int r = 0; r < assignment_.size; ++r) ranks.push_back(r);
    return ranks;
  }
  absl::MutexLock lock(&sets_mu_);
  auto it = sets_.find(process_set_id);
  if (it == sets_.end()) {
    return absl::NotFoundError(absl::StrCat("process set ", process_set_id, " does not exist"));
  }
  return it->second.ranks;
}

std::vector<int> Runtime::ProcessSetIds() const {
  std::vector<int> ids = {0};
  absl::MutexLock lock(&sets_mu_);
  for (const auto& [id, set] : sets_) ids.push_back(id);
  return ids;
}

void Runtime::DropProcessSets(const absl::Status& reason) {
  std::map<int, ProcessSet> sets;
  {
    absl::MutexLock lock(&sets_mu_);
    sets = std::move(sets_);
    sets_.clear();
    next_set_id_ = 1;
  }
  std::map<int, std::shared_ptr<Communicator>> comms;
  {
    absl::MutexLock lock(&comm_mu_);
    comms = std::move(set_comms_);
    set_comms_.clear();
  }
  for (auto& [id, set] : sets) {
    if (set.engine == nullptr) continue;
    std::shared_ptr<Communicator> comm = comms.count(id) ? comms[id] : nullptr;
    set.engine->Detach(reason, [comm] {
      if (comm != nullptr) comm->Abort();
    });
  }
  sets.clear();  // joins the engines' threads
  for (auto& [id, comm] : comms) reaper_.Retire(std::move(comm));
}

}  // namespace horovodd::internal
