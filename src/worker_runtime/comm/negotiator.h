// The transport of the engine's negotiation rounds among a communicator's
// ranks (what the parts say is engine/engine_decide.h's). Implementations:
// over the TCP ring (gloo/gloo_negotiator.h) and in one host's shared memory
// (shm_comm/shm_negotiator.h). Every rank takes the same one, so the parts,
// and the decision, are the same either way.
//
// A round: StartRound gives this rank's part to fill, Post sends it and
// returns at once (the caller may run a collective on the same
// communicator meanwhile), Collect waits for every peer's, Part reads them;
// ExchangeLater is the round's optional second exchange, for what did not
// fit in a part; EndRound closes a round that was decided, AbandonRound one
// that failed or was left.
//
// Who decides: every rank, from every part (decider() == kEveryRank), or
// one rank that reads the parts, decides and posts the result (PostResult),
// which the others take (AwaitResult) instead of collecting the parts; its
// word may also be "decide from the parts yourselves", and then every rank
// runs the round as where every rank decides.
//
// Every rank runs the same rounds in the same order, from the one thread
// that runs the engine's rounds. Errors are the
// communicator's (communicator.h); after one the communicator is dead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace horovodd::internal {

class Negotiator {
 public:
  // Where this rank writes its part: `header_bytes` (as asked) and then
  // `room` bytes, the same room on every rank.
  struct PartBuffer {
    uint8_t* data = nullptr;
    size_t room = 0;
  };

  static constexpr int kEveryRank = -1;

  virtual ~Negotiator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Starts a round whose parts begin with `header_bytes` (the same on every
  // rank). FAILED_PRECONDITION when the transport prepared the round for
  // another header size (EndRound's), which the caller's state must not allow.
  virtual absl::StatusOr<PartBuffer> StartRound(size_t header_bytes) = 0;
  // Sends the first `bytes` of this rank's part to every peer.
  virtual absl::Status Post(size_t bytes) = 0;
  // Waits for every peer's part; `arrived` hears each peer once, as its part
  // is seen (the stall check).
  virtual absl::Status Collect(absl::FunctionRef<void(int rank)> arrived) = 0;
  // After Collect: rank r's part (this rank's too).
  virtual absl::Span<const uint8_t> Part(int r) const = 0;
  // After Collect: every rank sends `mine` (bytes_by_rank[rank()] long) to
  // every other; returns every rank's bytes laid end to end in rank order,
  // valid until the round ends.
  virtual absl::StatusOr<const uint8_t*> ExchangeLater(absl::Span<const size_t> bytes_by_rank,
                                                       absl::string_view mine) = 0;
  // The rank that decides every round for the others, or kEveryRank. The
  // same on every rank, for the communicator's life.
  virtual int decider() const { return kEveryRank; }
  // The decider, after Collect: where the round's result goes, and its room.
  virtual absl::Span<uint8_t> ResultBuffer() { return {}; }
  // The decider, once per round after Collect (before ExchangeLater, if
  // any): posts the first `bytes` of ResultBuffer() as the round's result,
  // or with nullopt tells every rank to decide from the parts.
  virtual absl::Status PostResult(std::optional<size_t> /*bytes*/) {
    return absl::UnimplementedError("every rank decides a round here");
  }
  // Every rank but the decider, after Post: the decider's result (valid
  // until the round ends), or nullopt: Collect and decide from the parts.
  // `arrived` as Collect's, but a peer may go unheard when the round is
  // decided at once.
  virtual absl::StatusOr<std::optional<absl::Span<const uint8_t>>> AwaitResult(
      absl::FunctionRef<void(int rank)> /*arrived*/) {
    return absl::UnimplementedError("every rank decides a round here");
  }
  // Ends a decided round; the next one's parts begin with
  // `next_header_bytes` (a transport may get ready for it now).
  virtual absl::Status EndRound(size_t next_header_bytes) = 0;
  // Ends a round that failed or will not be finished.
  virtual void AbandonRound() = 0;
};

}  // namespace horovodd::internal
