// AllreduceAcrossHosts (gloo_local.h), in three steps, one after the other
// as in Horovod 0.28: shm::ReduceOwnPart reduces within the host, leaving
// each local rank its own contiguous part; that part is allreduced over TCP
// with the same local rank of every other host, in one exchange
// (AllreduceAmongHosts); shm::ShareOwnParts hands every part to every local
// rank. One CollectiveScope covers the whole allreduce (every rank draws one
// sequence number).
//
// Why not crossing hosts round by round, overlapped with the rounds within
// the host: that was the first design. Each round's slice (128 KiB at 2
// local ranks) then crossed in an exchange of its own, and an exchange costs
// wake-ups of the peer's Gloo loop thread and of ours whatever its size: on
// an idle 2-core machine, 2 "hosts" x 2 ranks at 16 MiB took 170-210 ms
// (32 crossings) against the flat TCP ring's 40 ms. One crossing of the
// whole part costs those wake-ups once.
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_local.h"
#include "worker_runtime/gloo/gloo_op_support.h"
#include "worker_runtime/gloo/gloo_ring.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/shm/shm_collectives.h"
#include "worker_runtime/shm/shm_own_parts.h"
#include "worker_runtime/tensor/reduce_kernels.h"

namespace horovodd::internal {
namespace {

// Pairwise among `members` (ring ranks, one per host; we are members[me]),
// in place on `part` (`count` elements): each member owns a piece of it,
// gets every member's copy of its piece, folds them into its own,
// finishes the reduction (kAverage divides by `total_ranks`, then the
// postscale) and sends the result to every member. Every receive is posted
// before the first send, so no peer's data waits for a ready-to-receive
// notice.
absl::Status AllreduceAmongHosts(CollectiveScope& scope, const std::vector<int>& members,
                                 int me, void* part, int64_t count,
                                 const AllreduceOptions& options, DType dtype, int total_ranks) {
  const int h = static_cast<int>(members.size());
  const size_t element = DTypeSize(dtype);
  const std::vector<int64_t> counts = EvenSplit(count, h);
  std::vector<PeerRegion> pieces(h);
  size_t offset = 0;
  for (int p = 0; p < h; ++p) {
    pieces[p] = PeerRegion{offset, static_cast<size_t>(counts[p]) * element};
    offset += pieces[p].bytes;
  }
  const size_t own = pieces[me].bytes;
  HVDD_ASSIGN_OR_RETURN(gloo::transport::UnboundBuffer * data,
                        scope.Register(part, count * element));
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::Scratch copies, scope.RegisterScratch(h * own + 1));
  // By ring rank: only the members' regions are non-empty.
  std::vector<PeerRegion> none(scope.size());
  std::vector<PeerRegion> copy_to(scope.size()), copy_from(scope.size());
  std::vector<PeerRegion> result_to(scope.size()), result_from(scope.size());
  for (int p = 0; p < h; ++p) {
    copy_to[members[p]] = pieces[p];
    copy_from[members[p]] = PeerRegion{p * own, own};
    result_to[members[p]] = pieces[me];
    result_from[members[p]] = pieces[p];
  }
  // A member's result for piece p lands in `part` only after it received all
  // of our copy of piece p: our send of it is done by then.
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::PostedExchange results,
                        scope.PostExchange(data, none, data, result_from, Channel::kResult));
  HVDD_RETURN_IF_ERROR(scope.ExchangeWithAll(data, copy_to, copies.buffer, copy_from,
                                             Channel::kData));
  // In place: our copy first, then the others' in member order (the same
  // order on every local rank: shm::ReduceOwnPart's).
  uint8_t* result = static_cast<uint8_t*>(part) + pieces[me].offset;
  for (int p = 0; p < h; ++p) {
    if (p != me) ReduceInto(dtype, options.op, result, copies.data + p * own, counts[me]);
  }
  FinishReduction(dtype, options.op, result, counts[me], total_ranks, options.postscale_factor);
  HVDD_ASSIGN_OR_RETURN(CollectiveScope::PostedExchange sent,
                        scope.PostExchange(data, result_to, data, none, Channel::kResult));
  HVDD_RETURN_IF_ERROR(scope.WaitExchange(results));
  return scope.WaitExchange(sent);
}

}  // namespace

absl::Status AllreduceAcrossHosts(GlooContext& context, LocalGroup& local, TensorView inout,
                                  const AllreduceOptions& options) {
  const std::string label = Label("allreduce", options.name);
  CollectiveScope scope(context, label);
  HVDD_RETURN_IF_ERROR(scope.CheckHealth());
  shm::ShmGroup& group = *local.group;
  const absl::Time deadline = CollectiveDeadline(context);
  HVDD_RETURN_IF_ERROR(AfterLocal(context, shm::ReduceOwnPart(group, inout, options, deadline)));
  // What kAverage divides by: every rank of every host, or only those that
  // contributed while others have joined.
  const int total_ranks = options.contributors > 0 ? options.contributors : local.total_ranks;
  const shm::PartRange part = shm::OwnPart(inout.numel(), group.size(), group.rank());
  if (part.count > 0) {
    // A failure here fails the context as the scope ends, and with it the
    // group: local peers waiting in ShareOwnParts wake.
    HVDD_RETURN_IF_ERROR(AllreduceAmongHosts(
        scope, local.cross_ranks, local.cross_index,
        static_cast<uint8_t*>(inout.data) + part.offset * DTypeSize(inout.dtype), part.count,
        options, inout.dtype, total_ranks));
  }
  return AfterLocal(context, shm::ShareOwnParts(group, inout, deadline));
}

}  // namespace horovodd::internal
