#include "worker_runtime/shm_comm/shm_negotiator.h"

#include <utility>

#include "common/check.h"
#include "common/status_macros.h"
#include "worker_runtime/gloo/gloo_transfer.h"
#include "worker_runtime/shm/shm_collectives.h"
#include "worker_runtime/shm_comm/shm_communicator.h"

namespace horovodd::internal {

ShmNegotiator::ShmNegotiator(ShmCommunicator& owner) : owner_(owner), channel_(*owner.group_) {}

absl::StatusOr<Negotiator::PartBuffer> ShmNegotiator::StartRound(size_t header_bytes) {
  HVDD_RETURN_IF_ERROR(LabeledHealth(owner_.ring_->context(), "negotiation"));
  HVDD_CHECK_LE(header_bytes, shm::NegotiationChannel::kPartBytes);
  deadline_ = owner_.Deadline();
  return PartBuffer{channel_.NextPart(), shm::NegotiationChannel::kPartBytes - header_bytes};
}

absl::Status ShmNegotiator::Post(size_t bytes) {
  channel_.Publish(bytes);
  return absl::OkStatus();
}

absl::Status ShmNegotiator::Collect(absl::FunctionRef<void(int rank)> arrived) {
  return owner_.AfterLocal(channel_.Collect(deadline_, arrived));
}

absl::StatusOr<const uint8_t*> ShmNegotiator::ExchangeLater(absl::Span<const size_t> bytes_by_rank,
                                                            absl::string_view mine) {
  HVDD_CHECK_EQ(mine.size(), bytes_by_rank[rank()]);
  // Only read: the allgather copies it out.
  const TensorView view{
      const_cast<char*>(mine.data()), DType::kUInt8, {static_cast<int64_t>(mine.size())}, Device{}};
  HVDD_ASSIGN_OR_RETURN(later_,
                        owner_.AfterLocal(shm::Allgather(*owner_.group_, view, deadline_)));
  return static_cast<const uint8_t*>(later_.data());
}

absl::Span<uint8_t> ShmNegotiator::ResultBuffer() {
  return absl::Span<uint8_t>(channel_.ResultBuffer(), shm::NegotiationChannel::kResultBytes);
}

absl::Status ShmNegotiator::PostResult(std::optional<size_t> bytes) {
  channel_.PublishResult(bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<absl::Span<const uint8_t>>> ShmNegotiator::AwaitResult(
    absl::FunctionRef<void(int rank)> arrived) {
  return owner_.AfterLocal(channel_.AwaitResult(deadline_, arrived));
}

absl::Status ShmNegotiator::EndRound(size_t /*next_header_bytes*/) {
  later_ = Tensor();
  return absl::OkStatus();
}

}  // namespace horovodd::internal
