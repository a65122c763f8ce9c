// Building and queueing engine requests for a runtime: the async API
// (async.h) and the synchronous one (horovodd.h, which enqueues and waits)
// both come through here, so requests are checked the same way and CUDA
// tensors take the GPU collectives on the engine thread.
#pragma once

#include <functional>
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
// A collective the engine runs alone, as it is (alltoall, reducescatter,
// barrier): `operation` names it, `tensors` are what ranks must agree on.
// `run` runs on the set's engine thread (use Runtime::RunCollective(id, op)).
absl::StatusOr<Handle> EnqueueOpaque(Runtime& runtime, std::string name, std::string operation,
                                     std::vector<TensorView> tensors,
                                     std::function<absl::Status(std::optional<Tensor>*)> run,
                                     bool urgent, int process_set_id = 0);
// This rank's join (horovodd::Join); its handle's output is the last rank
// to join (int32).
absl::StatusOr<Handle> EnqueueJoin(Runtime& runtime);

}  // namespace horovodd::internal
