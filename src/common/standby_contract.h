// What a standby horovodd answers a write with (issue 36): the contract
// between the daemon (daemon/standby) and the clients that follow the leader
// (cli/leader_follower: horovodctl, horovodrun). Header-only, in one place so
// both sides read the same key.
//
// A write RPC (SubmitJob, CancelJob, DrainHost, UndrainHost) sent to a
// standby fails with gRPC status FAILED_PRECONDITION, StandbyRefusal's
// message, and the trailing metadata kLeaderMetadataKey = the leader's
// address (absent while no daemon leads). Addresses are host:port as each
// daemon advertises itself.
#pragma once

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace horovodd {

// gRPC metadata keys are lower case.
inline constexpr char kLeaderMetadataKey[] = "horovodd-leader";

// "this horovodd (SELF) is a standby; the leader is LEADER", or "...; no
// leader is elected yet" when `leader` is empty.
inline std::string StandbyRefusal(absl::string_view self, absl::string_view leader) {
  return absl::StrCat("this horovodd (", self, ") is a standby; ",
                      leader.empty() ? std::string("no leader is elected yet")
                                     : absl::StrCat("the leader is ", leader));
}

// Whether a FAILED_PRECONDITION's message is StandbyRefusal's (for a daemon
// that sent no metadata).
inline bool IsStandbyRefusal(absl::string_view message) {
  return absl::StartsWith(message, "this horovodd (") &&
         absl::StrContains(message, ") is a standby; ");
}

}  // namespace horovodd
