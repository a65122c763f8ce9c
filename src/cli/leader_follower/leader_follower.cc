#include "cli/leader_follower/leader_follower.h"

#include <grpcpp/grpcpp.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/standby_contract.h"

namespace horovodd::cli {
namespace {

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Codes that say nothing came from this daemon: try another one.
bool Unreached(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// A standby's refusal: the leader it named ("" for none), else nullopt.
std::optional<std::string> Refusal(const grpc::Status& status, const grpc::ClientContext& context) {
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return std::nullopt;
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kLeaderMetadataKey);
  if (it != trailers.end()) return std::string(it->second.data(), it->second.size());
  if (IsStandbyRefusal(status.error_message())) return std::string();
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::string> NewClientRequestId() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(
          absl::StrCat("cannot make a client request id: getrandom: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  std::string id;
  for (unsigned char byte : bytes) absl::StrAppend(&id, absl::Hex(byte, absl::kZeroPad2));
  return id;
}

absl::StatusOr<std::vector<std::string>> SplitDaemonAddresses(const std::string& text) {
  std::vector<std::string> addresses;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "' has an empty daemon address (a list is host:port,host:port)"));
    }
    addresses.emplace_back(part);
  }
  return addresses;
}

LeaderFollower::LeaderFollower(FollowOptions options, ChannelFactory make_channel)
    : options_(std::move(options)), make_channel_(std::move(make_channel)) {
  current_ = options_.addresses.empty() ? "" : options_.addresses.front();
}

std::string LeaderFollower::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

std::shared_ptr<grpc::Channel> LeaderFollower::ChannelTo(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& channel = channels_[address];
  if (channel == nullptr) channel = make_channel_(address);
  return channel;
}

FollowResult LeaderFollower::Run(const Attempt& attempt, bool retry_unreachable) {
  retry_unreachable = retry_unreachable || options_.retry_unreachable;
  const absl::Time deadline = absl::Now() + options_.leader_wait;
  absl::Duration backoff = options_.initial_backoff;
  for (;;) {
    // The daemon that answered last first, then the list in its order.
    std::deque<std::string> queue;
    queue.push_back(current());
    for (const std::string& address : options_.addresses) queue.push_back(address);
    std::set<std::string> tried;
    std::vector<std::string> notes;  // "ADDRESS (why)", in the order tried
    bool refused = false;
    FollowResult last;
    while (!queue.empty()) {
      const std::string address = queue.front();
      queue.pop_front();
      if (!tried.insert(address).second) continue;
      grpc::ClientContext context;
      const grpc::Status status = attempt(address, ChannelTo(address), context);
      last = {ToAbsl(status), address, ""};
      if (std::optional<std::string> leader = Refusal(status, context)) {
        refused = true;
        notes.push_back(absl::StrCat(address, " (", status.error_message(), ")"));
        // Once per address a round: a hint to one already asked is stale.
        if (!leader->empty() && !tried.count(*leader)) queue.push_front(*leader);
        continue;
      }
      if (Unreached(status)) {
        notes.push_back(absl::StrCat(
            address, " (",
            status.error_code() == grpc::StatusCode::UNAVAILABLE ? "unreachable: " : "no answer: ",
            status.error_message(), ")"));
        continue;
      }
      // An answer: OK or the daemon's own error.
      absl::MutexLock lock(&mu_);
      current_ = address;
      return last;
    }
    if ((refused || retry_unreachable) && absl::Now() + backoff < deadline) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, options_.max_backoff);
      continue;
    }
    // The one address given could not be reached: the caller's words say so.
    if (!refused && !retry_unreachable && options_.addresses.size() == 1 && tried.size() == 1) {
      return last;
    }
    last.gave_up =
        absl::StrCat(refused ? "no horovodd leader took the call" : "cannot reach any horovodd",
                     refused || retry_unreachable
                         ? absl::StrCat(" within ", absl::FormatDuration(options_.leader_wait))
                         : "",
                     "; tried ", absl::StrJoin(notes, ", "));
    return last;
  }
}

}  // namespace horovodd::cli
