// Asynchronous collectives (Horovod's `*_async` / `synchronize` / `poll`):
// enqueue a named tensor, get a Handle back at once, and wait on it later.
//
//   std::vector<horovodd::Handle> handles;
//   for (auto& [name, grad] : grads) {
//     handles.push_back(*horovodd::AllreduceAsync(name, grad.view()));
//   }
//   for (auto& h : handles) if (auto st = horovodd::Synchronize(h); !st.ok()) return st;
//
// A background thread per runtime (the engine) matches requests across ranks
// by name: ranks may enqueue in different orders, a request runs once every
// rank has enqueued its name. Ready allreduces of the same dtype, op and
// scale factors are packed into one fusion buffer (up to the fusion
// threshold) and reduced with one collective. The synchronous API
// (horovodd.h) goes through the same engine, so both may be mixed.
//
// Names: one pending request per name per rank (INVALID_ARGUMENT for a
// second one); a name may be reused once its handle completed, also with a
// new shape. Ranks that enqueue one name with different dtypes, shapes,
// roots or options all get INVALID_ARGUMENT naming the tensor.
//
// Memory: the tensor's memory must stay alive and untouched until the
// handle completes (also when it fails).
//
// Failures: a lost peer or a membership change fails every pending handle
// (UNAVAILABLE for the collective that saw the peer go, ABORTED for the
// others and for requests made before the next Join); elastic::Run treats
// both like any collective failure. After a rejoin the engine runs on the
// new ring with an empty response cache.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "horovodd/tensor.h"

namespace horovodd {

namespace internal {
class HandleState;
}  // namespace internal

// One request's completion. A small value: copies refer to the same request.
// It completes exactly once (OK or an error), under a mutex; any number of
// threads may wait on it.
class Handle {
 public:
  Handle() = default;  // refers to nothing: valid() is false

  bool valid() const { return state_ != nullptr; }
  // The name the request was enqueued under ("" for an invalid handle).
  const std::string& name() const;

  // True once the request has completed (successfully or not); never blocks.
  bool Poll() const;
  // Waits until the request completes and returns its status, or returns
  // DEADLINE_EXCEEDED when it is still running after `timeout` (the request
  // goes on; wait again). FAILED_PRECONDITION for an invalid handle.
  absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration()) const;
  // Waits up to `timeout`: the request's status once it has completed, or
  // nullopt while it runs on. Unlike Wait(timeout), a request whose own error
  // is DEADLINE_EXCEEDED, or that completes just as the time runs out, is
  // never mistaken for one still running (a loop of short waits needs this).
  std::optional<absl::Status> WaitFor(absl::Duration timeout) const;

  // For requests with a result the engine allocates (allgather): waits, then
  // moves the result out. FAILED_PRECONDITION for in-place requests and when
  // the result was already taken.
  absl::StatusOr<Tensor> TakeOutput() const;

 private:
  friend class internal::HandleState;
  explicit Handle(std::shared_ptr<internal::HandleState> state) : state_(std::move(state)) {}

  std::shared_ptr<internal::HandleState> state_;
};

// In place, like Allreduce (horovodd.h); options.name is ignored (`name`
// identifies the request). INVALID_ARGUMENT at once for an empty name, a
// name already pending, bad tensors or non-finite scale factors;
// FAILED_PRECONDITION before Init().
absl::StatusOr<Handle> AllreduceAsync(std::string name, TensorView inout,
                                      const AllreduceOptions& options = {});

// Several tensors reduced as one request under one name: they complete
// together and are always fused with each other (even beyond the fusion
// threshold). Every rank must pass the same number of tensors with the same
// dtypes and shapes. One handle for the whole group.
absl::StatusOr<Handle> GroupedAllreduceAsync(std::string name, std::vector<TensorView> inouts,
                                             const AllreduceOptions& options = {});

// In place, like Broadcast: every rank ends with root's inout.
absl::StatusOr<Handle> BroadcastAsync(std::string name, TensorView inout, int root,
                                      int process_set_id = 0);

// Like Allgather (ranks may contribute different first dimensions); the
// result comes from handle.TakeOutput(). The input must stay alive until the
// handle completes.
absl::StatusOr<Handle> AllgatherAsync(std::string name, TensorView input, int process_set_id = 0);

// Like Reducescatter (horovodd.h), with options' op, scale factors and
// process set (options.name is ignored); the result (this rank's share)
// comes from handle.TakeOutput(). Ready reducescatters of the same dtype,
// op and scale factors are fused, as allreduces are.
absl::StatusOr<Handle> ReducescatterAsync(std::string name, TensorView input,
                                          const AllreduceOptions& options = {});

// Horovod's names: Synchronize waits without a deadline, Poll never blocks.
absl::Status Synchronize(const Handle& handle);
bool Poll(const Handle& handle);

// How the engine batches requests. Every rank uses rank 0's fusion
// threshold (it travels with each negotiation), so ranks never disagree on
// how tensors are packed; the cycle time is each rank's own.
struct EngineOptions {
  // Ready allreduces are packed into one buffer of at most this many bytes;
  // a tensor larger than it runs alone. 0 disables fusion.
  int64_t fusion_threshold_bytes = int64_t{128} << 20;
  // How long the engine collects requests before negotiating them, unless
  // someone is already waiting on one (Synchronize, or a synchronous call):
  // then it negotiates at once.
  absl::Duration cycle_time = absl::Milliseconds(1);

  // HOROVOD_FUSION_THRESHOLD (bytes) and HOROVOD_CYCLE_TIME (milliseconds,
  // fractions allowed), Horovod's names and units; unset ones keep the
  // defaults above. INVALID_ARGUMENT naming a variable that does not parse
  // or is negative (the cycle time must be positive).
  static absl::StatusOr<EngineOptions> FromEnvironment();
};

// Replaces the current runtime's engine options from the next cycle on.
// INVALID_ARGUMENT for a negative threshold or a non-positive cycle time;
// FAILED_PRECONDITION before Init().
absl::Status ConfigureEngine(const EngineOptions& options);
// The current runtime's engine options (the defaults before Init()).
EngineOptions CurrentEngineOptions();

}  // namespace horovodd
