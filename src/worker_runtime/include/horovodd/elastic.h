// Elastic training: state that survives membership changes, and the run loop
// that rebuilds the job around it.
//
//   horovodd::elastic::BufferState state;
//   state.AddBuffer("weights", &weights);
//   state.AddValue("epoch", &epoch);
//   absl::Status st = horovodd::elastic::Run(state, [&](auto& s) -> absl::Status {
//     for (; epoch < epochs; ++epoch) {
//       ... collectives ...;             // return their errors
//       if (auto st = s.Commit(); !st.ok()) return st;
//     }
//     return absl::OkStatus();
//   });
//
// Run calls the function; when it returns a collective failure (a peer was
// lost) Run restores the last commit, when it returns a host-update interrupt
// (from Commit or CheckHostUpdates) Run keeps the state. Either way Run then
// re-rendezvouses, rebuilds the rings, syncs the state from one rank that all
// agree on, calls the reset callbacks and calls the function again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace horovodd::elastic {

// The status Commit/CheckHostUpdates return when the job's membership
// changed: ABORTED, recognisable with IsHostsUpdated.
absl::Status HostsUpdatedError(int64_t current_generation, int64_t new_generation);
bool IsHostsUpdated(const absl::Status& status);

class State {
 public:
  virtual ~State() = default;

  // Saves the state as the point to return to after a failure, reports the
  // commit to the daemon (without waiting for it), then CheckHostUpdates().
  absl::Status Commit();
  // One tiny collective: if any rank has heard of a newer generation, every
  // rank returns HostsUpdatedError at this same step.
  absl::Status CheckHostUpdates();

  // Called after every reset (not on the first start), after the sync.
  void RegisterResetCallback(std::function<void()> callback);

  int64_t commits() const { return commits_; }
  // How many resets this worker has gone through inside Run.
  int resets() const { return resets_; }

  // Subclasses: copy the live values aside / back, and broadcast them from
  // `root` (every rank calls Sync with the same root).
  virtual void Save() = 0;
  virtual void Restore() = 0;
  virtual absl::Status Sync(int root) = 0;

 protected:
  // What Run does after every (re)start: syncs from the lowest rank among
  // those with the most commits (`commits` is this rank's count; new
  // workers have none) and returns that rank's count. This one spends a
  // collective on the choice, then calls Sync; a subclass whose Sync starts
  // with a collective of its own can fold the choice into it, one round
  // trip fewer after each reset (BufferState does).
  virtual absl::StatusOr<int64_t> SyncFromNewest(int64_t commits);

 private:
  friend absl::Status Run(State&, const std::function<absl::Status(State&)>&);
  void RunResetCallbacks();

  int64_t commits_ = 0;
  int resets_ = 0;
  std::vector<std::function<void()>> reset_callbacks_;
};

// A ready-made state over named buffers and integer values the caller owns.
// Buffers must have the same length on every rank.
class BufferState : public State {
 public:
  void AddBuffer(const std::string& name, std::vector<float>* buffer);
  void AddBuffer(const std::string& name, std::vector<double>* buffer);
  void AddValue(const std::string& name, int64_t* value);

  void Save() override;
  void Restore() override;
  absl::Status Sync(int root) override;

 protected:
  absl::StatusOr<int64_t> SyncFromNewest(int64_t commits) override;

 private:
  // The check every rank makes before any data moves (same names and
  // lengths everywhere, else INVALID_ARGUMENT on every rank); `extra` rides
  // along, reduced with max.
  absl::StatusOr<int64_t> CheckLayout(int64_t extra);
  absl::Status BroadcastFrom(int root);

  std::map<std::string, std::vector<float>*> float_buffers_;
  std::map<std::string, std::vector<double>*> double_buffers_;
  std::map<std::string, int64_t*> values_;
  std::map<std::string, std::vector<float>> saved_floats_;
  std::map<std::string, std::vector<double>> saved_doubles_;
  std::map<std::string, int64_t> saved_values_;
};

// Runs `train` until it returns OK (then returns OK) or returns an error that
// is not a collective failure or host update (then returns it). Requires
// Init(). A worker removed from the job exits the process with status 0.
absl::Status Run(State& state, const std::function<absl::Status(State&)>& train);

}  // namespace horovodd::elastic
