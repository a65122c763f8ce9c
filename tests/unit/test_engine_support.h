// Engines over in-process rings for the engine tests: one Engine per rank
// (threads of this process), attached to the communicators of a RankGroup's
// contexts, and helpers that build the requests the public API would. Every
// rank is on this host, so the rings get their shared memory as the
// runtime's do (comm_factory/: collectives and negotiation in the segment),
// unless HOROVODD_SHM=0 (the test_engine_tcp run): then everything goes
// over TCP.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <gloo/rendezvous/hash_store.h>

#include "absl/status/statusor.h"
#include "horovodd/async.h"
#include "test_collectives_harness.h"
#include "worker_runtime/comm/communicator.h"
#include "worker_runtime/comm_factory/comm_factory.h"
#include "worker_runtime/engine/engine.h"
#include "worker_runtime/engine/engine_activity.h"
#include "worker_runtime/engine/engine_request.h"
#include "worker_runtime/gloo/gloo_communicator.h"
#include "worker_runtime/gloo/gloo_context.h"
#include "worker_runtime/shm/shm_group.h"
#include "worker_runtime/shm_comm/shm_communicator.h"

namespace horovodd::testing {

inline internal::Request AllreduceRequest(const std::string& name, std::vector<TensorView> views,
                                          AllreduceOptions options = {}) {
  internal::Request r;
  r.name = name;
  r.kind = internal::RequestKind::kAllreduce;
  r.tensors = std::move(views);
  options.name = name;
  r.options = options;
  r.error_prefix = "'" + name + "': ";
  r.descriptor = internal::Describe(r).Encode();
  return r;
}

inline internal::Request BroadcastRequest(const std::string& name, TensorView view, int root) {
  internal::Request r;
  r.name = name;
  r.kind = internal::RequestKind::kBroadcast;
  r.tensors = {view};
  r.root = root;
  r.error_prefix = "'" + name + "': ";
  r.descriptor = internal::Describe(r).Encode();
  return r;
}

inline internal::Request AllgatherRequest(const std::string& name, TensorView view) {
  internal::Request r;
  r.name = name;
  r.kind = internal::RequestKind::kAllgather;
  r.tensors = {view};
  r.produces_output = true;
  r.error_prefix = "'" + name + "': ";
  r.descriptor = internal::Describe(r).Encode();
  return r;
}

inline internal::Request ReducescatterRequest(const std::string& name, TensorView view,
                                              AllreduceOptions options = {}) {
  internal::Request r;
  r.name = name;
  r.kind = internal::RequestKind::kReducescatter;
  r.tensors = {view};
  r.options = options;
  r.produces_output = true;
  r.error_prefix = "'" + name + "': ";
  r.descriptor = internal::Describe(r).Encode();
  return r;
}

// `size` engines, each attached to its rank's communicator of one ring.
class EngineGroup {
 public:
  // `rank_zero_decides_from`: shm::GroupOptions's, by default
  // HOROVODD_SHM_DECIDER_FROM's (the test_engine_shm_decider run) or the
  // runtime's default.
  EngineGroup(int size, EngineOptions options = {},
              std::optional<int> rank_zero_decides_from = std::nullopt)
      : size_(size), rank_zero_decides_from_(rank_zero_decides_from) {
    if (!rank_zero_decides_from_.has_value()) {
      const char* from = std::getenv("HOROVODD_SHM_DECIDER_FROM");
      rank_zero_decides_from_ =
          from != nullptr ? std::atoi(from) : internal::shm::kRankZeroDecidesFrom;
    }
    for (int r = 0; r < size; ++r) {
      activities_.push_back(std::make_shared<internal::ActivityTracker>());
      engines_.push_back(std::make_unique<internal::Engine>(
          options, internal::StallOptions{}, internal::ActivitySink{activities_.back(), 0}));
    }
    Connect();
  }
  ~EngineGroup() {
    for (int r = 0; r < size_; ++r) Detach(r);
  }

  int size() const { return size_; }
  internal::Engine& engine(int rank) { return *engines_[rank]; }
  // What rank's engine reports doing (engine_activity.h).
  internal::ActivityTracker& activity(int rank) { return *activities_[rank]; }
  internal::GlooContext& context(int rank) { return ring_->context(rank); }
  internal::Communicator& communicator(int rank) { return *comms_[rank]; }
  // Every rank of the ring shares this host's memory (not in test_engine_tcp).
  bool in_shared_memory() const {
    return dynamic_cast<const internal::ShmCommunicator*>(comms_[0].get()) != nullptr;
  }

  // A new ring (a new "generation") for every engine, which must be detached.
  void Connect() {
    ring_ = std::make_unique<RankGroup>(store_, "ring" + std::to_string(++rings_), size_);
    comms_.assign(size_, nullptr);
    for (int r = 0; r < size_; ++r) {
      comms_[r] = std::make_shared<internal::GlooCommunicator>(ring_->shared(r));
    }
    const char* shm = std::getenv("HOROVODD_SHM");
    if (shm == nullptr || std::strcmp(shm, "0") != 0) {
      const auto connected = OnEveryRank<absl::StatusOr<std::shared_ptr<internal::Communicator>>>(
          size_, [&](int rank) {
            internal::LocalOptions local;
            local.local_rank = rank;
            local.local_size = size_;
            local.rank_zero_decides_from = *rank_zero_decides_from_;
            return internal::ConnectCommunicator(
                std::make_shared<internal::GlooCommunicator>(ring_->shared(rank)), local);
          });
      for (int r = 0; r < size_; ++r) {
        REQUIRE(connected[r].ok());
        comms_[r] = *connected[r];
      }
    }
    for (int r = 0; r < size_; ++r) {
      std::shared_ptr<internal::Communicator> comm = comms_[r];
      engines_[r]->Attach(rings_, [comm](internal::CommunicatorOp op) { return op(*comm); });
    }
  }
  void Detach(int rank) {
    std::shared_ptr<internal::Communicator> comm = comms_[rank];
    engines_[rank]->Detach(absl::AbortedError("the test detached the engine"),
                           [comm] { comm->Abort(); });
  }

 private:
  const int size_;
  std::optional<int> rank_zero_decides_from_;
  gloo::rendezvous::HashStore store_;
  int rings_ = 0;
  std::unique_ptr<RankGroup> ring_;
  std::vector<std::shared_ptr<internal::Communicator>> comms_;          // by rank, of ring_
  std::vector<std::shared_ptr<internal::ActivityTracker>> activities_;  // by rank
  std::vector<std::unique_ptr<internal::Engine>> engines_;
};

}  // namespace horovodd::testing
