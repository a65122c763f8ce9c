// A request's handle (async.h) waited on in short slices, as the Python
// bindings wait so that Ctrl-C stays responsive: a slice that runs out says
// "still running", never the request's status, and a request that completes
// just as a slice runs out is read as completed, with its own status.
#include <memory>
#include <optional>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "horovodd/async.h"
#include "worker_runtime/engine/engine_handle.h"

namespace horovodd {
namespace {

using internal::HandleState;

TEST_CASE("WaitFor: nullopt while the request runs, its status once done", "[engine][handle]") {
  auto state = std::make_shared<HandleState>("pending", false, nullptr);
  const Handle handle = HandleState::MakeHandle(state);
  CHECK_FALSE(handle.WaitFor(absl::Milliseconds(5)).has_value());
  state->Complete(absl::OkStatus());
  const std::optional<absl::Status> done = handle.WaitFor(absl::Milliseconds(5));
  REQUIRE(done.has_value());
  CHECK(done->ok());
}

TEST_CASE("WaitFor: a request's own DEADLINE_EXCEEDED is its status, not a slice running out",
          "[engine][handle]") {
  auto state = std::make_shared<HandleState>("timed-out", false, nullptr);
  const Handle handle = HandleState::MakeHandle(state);
  state->Complete(absl::DeadlineExceededError("a peer stayed silent"));
  const std::optional<absl::Status> done = handle.WaitFor(absl::Milliseconds(5));
  REQUIRE(done.has_value());
  CHECK(done->message() == "a peer stayed silent");
}

TEST_CASE("WaitFor: a request completing as the slice runs out gives its own status",
          "[engine][handle]") {
  // The handle's wait hook runs after the timed-out wait and before WaitFor
  // looks again: the request completes in exactly the window where a loop of
  // Wait(slice) calls read the slice's timeout as the request's failure.
  std::shared_ptr<HandleState> state;
  int completions = 0;
  state = std::make_shared<HandleState>("racing", false, [&](bool entering) {
    if (!entering && completions++ == 0) state->Complete(absl::OkStatus());
  });
  const Handle handle = HandleState::MakeHandle(state);
  const std::optional<absl::Status> done = handle.WaitFor(absl::Milliseconds(5));
  REQUIRE(done.has_value());
  CHECK(done->ok());
}

}  // namespace
}  // namespace horovodd
