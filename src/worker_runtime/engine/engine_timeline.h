// Horovod's timeline: a Chrome trace event file (chrome://tracing, Perfetto)
// of what the engine did with each tensor. Each request name is a "process"
// of the trace (its row, named UserFacingName), with these phases, in order:
//   NEGOTIATE_<OP>   from the request's enqueue until every rank had it;
//   <OP>             from then until it completed, holding
//     WAIT_FOR_DATA  until its batch started (earlier batches ran first),
//     then its batch's activities, each until the next, whose args name the
//     batch it was fused into: for a batch of several tensors
//     MEMCPY_IN_FUSION_BUFFER, <BACKEND>_<OP> (the collective itself,
//     "GLOO_ALLREDUCE") and MEMCPY_OUT_FUSION_BUFFER, as in Horovod's
//     timeline; for a tensor alone only <BACKEND>_<OP>.
// With mark_cycles, every negotiation round is a CYCLE_START instant event.
//
// Rank 0 writes it (Horovod's rule); the others pass no timeline to their
// engine. Thread-safe: the engine thread records, the training thread
// starts and stops. The file is a JSON array, complete after Stop() (and
// readable by both viewers while it is being written: they accept an
// unterminated array).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace horovodd::internal {

struct Request;  // engine_request.h

class Timeline {
 public:
  // Opens (truncates) `path`. INVALID_ARGUMENT for an empty path,
  // UNAVAILABLE naming the path when it cannot be written.
  static absl::StatusOr<std::unique_ptr<Timeline>> Open(const std::string& path, bool mark_cycles);
  ~Timeline();  // Stop()s
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  bool mark_cycles() const { return mark_cycles_; }

  // `operation` in Horovod's upper case: "ALLREDUCE", "BROADCAST", ...
  void NegotiateStart(const std::string& tensor, const std::string& operation)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Negotiation done: the tensor is ready on every rank (the op begins and
  // it waits for its batch).
  void NegotiateEnd(const std::string& tensor, const std::string& operation)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Its batch moves on to `activity` ("MEMCPY_IN_FUSION_BUFFER",
  // "GLOO_ALLREDUCE"), in the batch `batch` ("a + 2 fused") of `batch_size`
  // tensors; this ends WAIT_FOR_DATA, or the batch's previous activity.
  void ActivityStart(const std::string& tensor, const std::string& activity,
                     const std::string& batch, int batch_size) ABSL_LOCKS_EXCLUDED(mu_);
  // The tensor completed (`error` empty when it succeeded).
  void End(const std::string& tensor, const std::string& error) ABSL_LOCKS_EXCLUDED(mu_);
  void CycleStart() ABSL_LOCKS_EXCLUDED(mu_);

  // Ends whatever is open, closes the array and the file. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Timeline(std::FILE* file, bool mark_cycles);
  // The tensor's trace process id, declaring it on first use.
  int ProcessOf(const std::string& tensor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Write(const std::string& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t Now() const;  // microseconds since Open

  const bool mark_cycles_;
  const absl::Time started_ = absl::Now();
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
  bool first_event_ ABSL_GUARDED_BY(mu_) = true;
  std::unordered_map<std::string, int> processes_ ABSL_GUARDED_BY(mu_);
  // Per tensor, how many phases are open (B without E), to close at End.
  std::unordered_map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
};

// "ALLREDUCE" for "allreduce".
std::string TimelineOperation(const std::string& operation);
// The request's operation as the timeline names it: "ALLREDUCE", or for an
// opaque request its operation's first word ("ADD_PROCESS_SET").
std::string TimelineOperationOf(const Request& request);

}  // namespace horovodd::internal
