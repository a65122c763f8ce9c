// What the engine queues: one named request (a tensor or a group of them and
// the collective to run on it), and the descriptor ranks compare to decide
// that their requests of one name agree.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "horovodd/tensor.h"
#include "worker_runtime/engine/engine_handle.h"

namespace horovodd::internal {

enum class RequestKind : uint8_t {
  kAllreduce,  // in place, fusable with others of the same dtype/op/scales
  kBroadcast,  // in place, fusable with others of the same root
  kAllgather,  // result in the handle's output
  kOpaque,     // runs `run` alone (alltoall, reducescatter, barrier, CUDA tensors)
  // This rank is out of data (horovodd::Join). Until every rank has one
  // pending, the others' allreduces run with this rank contributing zeros;
  // once all have, it completes with the last rank to join (an int32).
  kJoin,
  // One tensor reduced (options: op and scale factors), each rank's share
  // of its first dimension in the handle's output; fusable with others of
  // the same dtype, op and scales.
  kReducescatter,
};

// The name every rank's join request has.
inline constexpr char kJoinRequestName[] = "horovodd.sync.join";

// A request's name as users know it, for the stall check and the timeline:
// a synchronous call's request "horovodd.sync.<op>.<name>" is "<name>"
// ("<op>" when it has none); any other name is itself.
std::string UserFacingName(const std::string& name);

// Everything about a request that every rank must agree on. Allgather leaves
// out the first dimension (ranks may contribute different ones).
struct RequestDescriptor {
  RequestKind kind = RequestKind::kAllreduce;
  std::string operation;  // "allreduce", "alltoall", ... (for messages and opaque kinds)
  DeviceType device = DeviceType::kCPU;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  std::vector<std::vector<int64_t>> shapes;  // one per tensor

  // Bytes that are equal exactly when two descriptors are.
  std::string Encode() const;
  static absl::StatusOr<RequestDescriptor> Decode(const std::string& bytes);
  // "allreduce of float32 [4, 3] (average)" -- for error messages.
  std::string ToString() const;
};

struct Request {
  std::string name;
  RequestKind kind = RequestKind::kAllreduce;
  std::vector<TensorView> tensors;  // the caller's memory
  AllreduceOptions options;         // allreduce, reducescatter
  int root = 0;                     // broadcast
  // kOpaque: the collective, run on the engine thread (which owns the ring);
  // it may leave a result in *output.
  std::function<absl::Status(std::optional<Tensor>* output)> run;
  std::string opaque_operation;  // kOpaque: what `run` does ("alltoall"), for messages
  // Put before the message of an error: "'name': " for async requests;
  // empty for synchronous calls, whose errors read as they always did.
  std::string error_prefix;
  bool produces_output = false;  // the handle's TakeOutput() has a result
  std::string descriptor;        // RequestDescriptor::Encode()
  std::shared_ptr<HandleState> handle;

  size_t nbytes() const;
};

// Builds the descriptor of a request whose fields above are set.
RequestDescriptor Describe(const Request& request);

}  // namespace horovodd::internal
