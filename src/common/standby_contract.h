// What a standby horovodd answers a write with (issue 36): the contract
// between the daemon (daemon/standby) and the clients that follow the leader
// (horovodctl, horovodrun). Kept in one place so both sides read the same key.
//
// A write RPC (SubmitJob, CancelJob, DrainHost, UndrainHost) sent to a
// standby fails with gRPC status FAILED_PRECONDITION, the message
//   "this horovodd (ADDR) is a standby; the leader is LEADER_ADDR"
// or, while no daemon leads,
//   "this horovodd (ADDR) is a standby; no leader is elected yet"
// and the trailing metadata kLeaderMetadataKey = LEADER_ADDR (absent when
// no daemon leads). ADDR and LEADER_ADDR are host:port as each daemon
// advertises itself.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace horovodd {

inline constexpr char kLeaderMetadataKey[] = "horovodd-leader";

// The message of a standby's refusal; `leader` empty while none leads.
inline std::string StandbyRefusal(absl::string_view self, absl::string_view leader) {
  return leader.empty()
             ? absl::StrCat("this horovodd (", self, ") is a standby; no leader is elected yet")
             : absl::StrCat("this horovodd (", self, ") is a standby; the leader is ", leader);
}

}  // namespace horovodd
