// The state behind a horovodd::Handle (async.h): one request's completion,
// set exactly once under a mutex by whichever thread runs the engine's round
// (the engine thread, or a waiter driving it: engine.h), waited on by
// any number of threads (c10d's Work, in small).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "horovodd/async.h"
#include "horovodd/tensor.h"

namespace horovodd::internal {

class HandleState {
 public:
  // `drive(*this)` runs (outside the lock) first when a thread waits without
  // a deadline on the pending handle: it runs the engine's rounds on that
  // thread while it can, sparing two thread hand-offs per call. Then, if
  // the handle is still pending, `on_wait(true)` runs before the thread
  // blocks and `on_wait(false)` after: while someone waits, the engine
  // thread negotiates without waiting for its cycle time. Either may be
  // empty.
  HandleState(std::string name, bool produces_output, std::function<void(bool)> on_wait,
              std::function<void(const HandleState&)> drive = nullptr);

  static Handle MakeHandle(std::shared_ptr<HandleState> state) { return Handle(std::move(state)); }

  const std::string& name() const { return name_; }
  bool done() const ABSL_LOCKS_EXCLUDED(mu_);

  // Completes the request. Only the first call counts (the engine may race a
  // reset against a finishing collective); returns whether it was this one.
  bool Complete(absl::Status status, std::optional<Tensor> output = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Wait(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Tensor> TakeOutput() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string name_;
  const bool produces_output_;
  const std::function<void(bool)> on_wait_;
  const std::function<void(const HandleState&)> drive_;

  // Waiters Await done_, which wakes them when Complete releases mu_.
  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::optional<Tensor> output_ ABSL_GUARDED_BY(mu_);
  bool output_taken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace horovodd::internal
