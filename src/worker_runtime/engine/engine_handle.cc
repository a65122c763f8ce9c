#include "worker_runtime/engine/engine_handle.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace horovodd::internal {

HandleState::HandleState(std::string name, bool produces_output, std::function<void(bool)> on_wait,
                         std::function<void(const HandleState&)> drive)
    : name_(std::move(name)),
      produces_output_(produces_output),
      on_wait_(std::move(on_wait)),
      drive_(std::move(drive)) {}

bool HandleState::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

bool HandleState::Complete(absl::Status status, std::optional<Tensor> output) {
  {
    absl::MutexLock lock(&mu_);
    if (done_) return false;
    done_ = true;
    status_ = std::move(status);
    output_ = std::move(output);
  }
  return true;
}

absl::Status HandleState::Wait(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (done_) return status_;
  }
  // Only without a deadline: a round may block in a collective until the
  // peers join it, which a caller with a deadline must not be made to do.
  if (drive_ && timeout == absl::InfiniteDuration()) {
    drive_(*this);
    absl::MutexLock lock(&mu_);
    if (done_) return status_;
  }
  if (on_wait_) on_wait_(true);
  absl::Status result;
  {
    absl::MutexLock lock(&mu_);
    if (timeout == absl::InfiniteDuration()) {
      mu_.Await(absl::Condition(&done_));
      result = status_;
    } else if (mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
      result = status_;
    } else {
      result = absl::DeadlineExceededError(
          absl::StrCat("'", name_, "' is still running after ", absl::FormatDuration(timeout)));
    }
  }
  if (on_wait_) on_wait_(false);
  return result;
}

absl::StatusOr<Tensor> HandleState::TakeOutput() {
  if (!produces_output_) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", name_, "' works in place: it has no output to take"));
  }
  HVDD_RETURN_IF_ERROR(Wait(absl::InfiniteDuration()));
  absl::MutexLock lock(&mu_);
  if (output_taken_ || !output_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the output of '", name_, "' was already taken"));
  }
  output_taken_ = true;
  Tensor result = std::move(*output_);
  output_.reset();
  return result;
}

}  // namespace horovodd::internal

// ---------------------------------------------------------------------------
// horovodd::Handle: forwards to the shared state.
// ---------------------------------------------------------------------------

namespace horovodd {
namespace {

absl::Status InvalidHandle() {
  return absl::FailedPreconditionError("the handle refers to no request (default-constructed)");
}

}  // namespace

const std::string& Handle::name() const {
  static const std::string* const kEmpty = new std::string();
  return state_ == nullptr ? *kEmpty : state_->name();
}

bool Handle::Poll() const { return state_ != nullptr && state_->done(); }

absl::Status Handle::Wait(absl::Duration timeout) const {
  if (state_ == nullptr) return InvalidHandle();
  return state_->Wait(timeout);
}

std::optional<absl::Status> Handle::WaitFor(absl::Duration timeout) const {
  absl::Status status = Wait(timeout);
  if (!absl::IsDeadlineExceeded(status)) return status;
  // The time ran out, or the request failed with DEADLINE_EXCEEDED: only a
  // completed request's status is its own. It may have completed between the
  // end of the wait and this look, so its status is read again.
  if (!Poll()) return std::nullopt;
  return Wait(absl::ZeroDuration());
}

absl::StatusOr<Tensor> Handle::TakeOutput() const {
  if (state_ == nullptr) return InvalidHandle();
  return state_->TakeOutput();
}

absl::Status Synchronize(const Handle& handle) { return handle.Wait(); }

bool Poll(const Handle& handle) { return handle.Poll(); }

}  // namespace horovodd
