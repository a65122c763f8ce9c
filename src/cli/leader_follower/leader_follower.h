// How horovodrun and horovodctl reach "the" horovodd when an HA setup runs
// several (one leader, standbys; see common/standby_contract.h): each call goes to
// the daemon that answered last, else to the addresses in their order; a
// daemon that cannot be reached is skipped, a standby's refusal naming the
// leader sends the call there (each address at most once per round, so two
// standbys naming each other do not loop), and while no leader is elected
// the rounds are repeated with backoff until a deadline. Then the call fails
// with every address tried and why.
//
// Long-lived streams (a job's events) run as one call each: the caller's
// function reads until the stream ends and, when it broke after some
// progress, calls Run again to resume on whichever daemon answers.
//
// Threading: Run may be called from several threads at once (horovodrun's
// interrupt thread cancels while its main thread watches).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace grpc {
class Channel;
class ClientContext;
class Status;
}  // namespace grpc

namespace horovodd::cli {

// A SubmitJobRequest.client_request_id: 128 random bits from the kernel as 32
// hex digits. Made once per job a client means to submit and sent with every
// try, so a submission retried on another daemon (Run) after its answer was
// lost answers the job the first try made instead of making a second one.
// INTERNAL when the kernel has no randomness to give.
absl::StatusOr<std::string> NewClientRequestId();

// "h1:7451, h2:7451" to its addresses (blanks dropped); INVALID_ARGUMENT for
// an empty list or an empty element ("h1:7451,,h2:7451").
absl::StatusOr<std::vector<std::string>> SplitDaemonAddresses(const std::string& text);

struct FollowOptions {
  std::vector<std::string> addresses;  // in the order to try, at least one
  // How long to keep trying while no leader is elected (every answer was a
  // standby's refusal) or, with retry_unreachable, no daemon answers.
  absl::Duration leader_wait = absl::Seconds(30);
  // Also retry rounds in which no daemon could be reached (a daemon being
  // restarted); otherwise such a round fails at once.
  bool retry_unreachable = false;
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(2);
};

// What one call came to.
struct FollowResult {
  // The answer that ended the search: OK, the daemon's own error (NOT_FOUND,
  // ...), or, when no daemon answered, the last failure.
  absl::Status status;
  // Who gave `status` (the last address tried).
  std::string address;
  // Set only when no daemon took the call: every address tried and why, and
  // the caller should show it instead of `status`'s message. Empty when the
  // one address given simply could not be reached (the caller says so in
  // its own words).
  std::string gave_up;
};

class LeaderFollower {
 public:
  using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;
  // One attempt on one daemon: makes its call (setting its own deadline on
  // `context`) and returns its status; the follower reads the trailing
  // metadata from `context`.
  using Attempt = std::function<grpc::Status(const std::string& address,
                                             const std::shared_ptr<grpc::Channel>& channel,
                                             grpc::ClientContext& context)>;

  // `make_channel` adds the caller's credentials; channels are made once per address.
  LeaderFollower(FollowOptions options, ChannelFactory make_channel);

  // `retry_unreachable` as FollowOptions's, for this call (a stream resuming
  // after its daemon went away waits for one to come back).
  FollowResult Run(const Attempt& attempt, bool retry_unreachable = false) ABSL_LOCKS_EXCLUDED(mu_);

  // The address that answered last (the first one before any did).
  std::string current() const ABSL_LOCKS_EXCLUDED(mu_);
  const FollowOptions& options() const { return options_; }

 private:
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  const FollowOptions options_;
  const ChannelFactory make_channel_;
  mutable absl::Mutex mu_;
  std::string current_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::cli
