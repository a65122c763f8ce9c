// Building and queueing engine requests for a runtime: the async API
// (async.h) and the synchronous one (horovodd.h, which enqueues and waits)
// both come through here, so requests are checked the same way and CUDA
// tensors take the GPU collectives on the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/async.h"
#include "horovodd/tensor.h"

namespace horovodd::internal {

class Runtime;

// The name a synchronous call's request takes: "horovodd.sync.<op>[.<name>]"
// (one per op and user name, so their descriptors stay cached).
std::string SyncName(const char* operation, const std::string& user_name);
bool IsSyncName(const std::string& name);

// `urgent`: the caller waits at once (no cycle-time wait before negotiating).
// Each goes to the engine of its process set (options.process_set_id, or
// `process_set_id`); NOT_FOUND or FAILED_PRECONDITION at once for a set that
// does not exist or that this rank is not a member of.
absl::StatusOr<Handle> EnqueueAllreduce(Runtime& runtime, std::string name,
                                        std::vector<TensorView> inouts,
                                        const AllreduceOptions& options, bool urgent);
// `root` is a rank of the job, a member of the set.
absl::StatusOr<Handle> EnqueueBroadcast(Runtime& runtime, std::string name, TensorView inout,
                                        int root, bool urgent, int process_set_id = 0);
absl::StatusOr<Handle> EnqueueAllgather(Runtime& runtime, std::string name, TensorView input,
                                        bool urgent, int process_set_id = 0);
// options: op, scale factors and process set (name is ignored); the
// handle's output is this rank's share.
absl::StatusOr<Handle> EnqueueReducescatter(Runtime& runtime, std::string name, TensorView input,
                                            const AllreduceOptions& options, bool urgent);
// A collective the engine runs alone, as it is (alltoall, reducescatter,
// barrier): `operation` names it, `tensors` are what ranks must agree on.
// `run` runs on the set's engine thread (use Runtime::RunCollective(id, op)).
// `produces_output`: `run` leaves a result for the handle's TakeOutput().
absl::StatusOr<Handle> EnqueueOpaque(Runtime& runtime, std::string name, std::string operation,
                                     std::vector<TensorView> tensors,
                                     std::function<absl::Status(std::optional<Tensor>*)> run,
                                     bool urgent, int process_set_id = 0,
                                     bool produces_output = false);
// This rank's join (horovodd::Join); its handle's output is the last rank
// to join (int32).
absl::StatusOr<Handle> EnqueueJoin(Runtime& runtime);

// The current runtime, or FAILED_PRECONDITION: "<operation> needs
// horovodd::Init() first".
absl::StatusOr<Runtime*> RuntimeFor(const char* operation);

// The synchronous collectives' requests (engine_sync.cc): horovodd.h's calls
// start one and wait for it; the Python bindings wait in slices and may stop
// waiting early. Each request owns what it needs except the caller's tensors,
// which must stay alive and untouched until its handle completes (it
// completes, or fails at the next reset, whether or not anyone waits).
// Allgather, alltoall and reducescatter leave their result in the handle's
// output; alltoall fills *received_splits (how many rows came from each
// rank) before its handle completes.
absl::StatusOr<Handle> StartAllreduce(Runtime& runtime, TensorView inout,
                                      const AllreduceOptions& options);
absl::StatusOr<Handle> StartAllgather(Runtime& runtime, TensorView input, int process_set_id);
absl::StatusOr<Handle> StartBroadcast(Runtime& runtime, TensorView inout, int root,
                                      int process_set_id);
absl::StatusOr<Handle> StartAlltoall(Runtime& runtime, TensorView input,
                                     std::vector<int64_t> splits,
                                     std::shared_ptr<std::vector<int64_t>> received_splits,
                                     int process_set_id);
absl::StatusOr<Handle> StartReducescatter(Runtime& runtime, TensorView input,
                                          const AllreduceOptions& options);
absl::StatusOr<Handle> StartBarrier(Runtime& runtime, int process_set_id);
// In place: the Adasum of every rank's CPU `inout` (gloo/gloo_adasum.h: a
// float dtype, a power-of-two set).
absl::StatusOr<Handle> StartAdasum(Runtime& runtime, TensorView inout, double prescale_factor,
                                   double postscale_factor, int process_set_id);

}  // namespace horovodd::internal
