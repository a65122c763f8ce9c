// What the worker runtime needs from the daemon that launched it: the
// rendezvous, the generation's keys, the advisory reports, and the notices
// of new generations. DaemonClient (daemon_client.h) is the real one, over
// gRPC; tests run the runtime against an in-process fake instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "horovodd.pb.h"

namespace horovodd::internal {

// The notices a connection delivers come through the callback its maker was
// given (DaemonClientOptions::on_message), on a thread of the connection's
// own; it must not block.
class DaemonConnection {
 public:
  virtual ~DaemonConnection() = default;

  // Starts talking to the daemon (notices flow from here on). Once.
  virtual void StartAttach() = 0;
  // Flushes what is still queued (bounded), stops the connection's threads.
  // Idempotent; no callback runs after it returns.
  virtual void Stop() = 0;

  // Waits for the first stable generation newer than `after_generation`.
  // Errors as the daemon sent them; CANCELLED once Stop() is called. One
  // caller at a time.
  virtual absl::StatusOr<v1::RendezvousResponse> Rendezvous(int64_t after_generation) = 0;

  // The generation's key-value namespace (codes as in kv_client/kv_store.h).
  virtual absl::Status KvSet(int64_t generation, const std::string& key, std::string value) = 0;
  virtual absl::StatusOr<std::vector<std::string>> KvGet(int64_t generation,
                                                         const std::vector<std::string>& keys,
                                                         absl::Duration timeout) = 0;

  // Queued, never blocking the caller; a newer commit replaces an unsent one.
  virtual void ReportCommit(int64_t generation, int64_t commit) = 0;
  virtual void ReportFailure(int64_t generation, std::string message) = 0;

  // The generation this worker is in now (its heartbeats say so).
  virtual void set_current_generation(int64_t generation) = 0;
  // The newest generation any notice announced (0 before any).
  virtual int64_t newest_generation() const = 0;
};

}  // namespace horovodd::internal
