// The contract between a standby horovodd and the clients that follow the
// leader (cli/leader_follower): a standby refuses a write with gRPC
// FAILED_PRECONDITION, StandbyRefusal's message, and the leader's address in
// the trailing metadata under kLeaderMetadataKey ("" or absent while no
// leader is elected). Header-only: the daemon's RPC layer and the CLIs both
// include it.
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
