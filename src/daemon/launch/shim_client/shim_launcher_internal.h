// ShimLauncher's insides, shared by shim_launcher.cc (this machine's shims,
// the protocol) and shim_launcher_remote.cc (shims on other hosts). Not for
// other users.
#pragma once

#include <sys/socket.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/launch/shim_client/shim_launcher.h"
#include "daemon/launch/ssh/remote_shim_link.h"
#include "daemon/shim_protocol/shim_protocol.h"
#include "shim.pb.h"

namespace horovodd::daemon {

inline constexpr absl::Duration kHandshakeTimeout = absl::Seconds(20);

// One connection to one shim (this machine's, or a remote host's through
// its link), and the workers it holds.
struct ShimLauncher::Shim {
  struct Entry {
    int64_t handle = 0;
    int pid = 0;
    bool exited = false;
    std::shared_ptr<ProcessCallbacks> callbacks;
  };
  struct Pending {
    std::shared_ptr<ProcessCallbacks> callbacks;
    int64_t handle = 0;
    bool done = false;
    absl::Status status;
    int pid = 0;
  };

  ShimKey key;  // (job id, host): host "" on this machine
  int pid = 0;  // the shim's, from its Welcome
  // A remote shim's SSH link; fd is then a duplicate of the link's end.
  std::unique_ptr<RemoteShimLink> link;
  // What the workers of a remote shim dial (their end of the link's
  // tunnel); empty: the address the driver gave them.
  std::string workers_daemon_address;
  UniqueFd fd;
  horovodd::shim::FrameReader frames;  // the handshake's, then the reader thread's
  absl::Mutex write_mu;                // one frame at a time

  absl::Mutex mu;
  std::map<int64_t, Entry> workers ABSL_GUARDED_BY(mu);    // by worker id, until exited
  std::map<int64_t, Pending> pending ABSL_GUARDED_BY(mu);  // launches waiting for Launched
  bool detaching ABSL_GUARDED_BY(mu) = false;
  bool gone ABSL_GUARDED_BY(mu) = false;  // the connection ended

  std::thread reader;

  // " on HOST" for a remote shim, for messages.
  std::string where() const { return key.second.empty() ? "" : absl::StrCat(" on ", key.second); }

  absl::Status Send(const horovodd::shim::v1::ShimRequest& request) {
    absl::MutexLock lock(&write_mu);
    return horovodd::shim::WriteAll(fd.get(), horovodd::shim::EncodeFrame(request));
  }
  absl::Status SendHello() {
    horovodd::shim::v1::ShimRequest hello;
    hello.mutable_hello()->set_protocol_version(horovodd::shim::kProtocolVersion);
    hello.mutable_hello()->set_job_id(key.first);
    return Send(hello);
  }
};

inline void SetReceiveTimeout(int fd, absl::Duration timeout) {
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

// 16 hex digits naming a daemon by this machine's name and its socket dir:
// the same after a restart on the same state dir, different for two daemons.
std::string ShimNamespaceOf(const std::string& socket_dir);

// One contents of every shim found; the failures as warnings. With
// `local_expected` false, a missing shim on this machine is no warning.
// The first failure when nothing was found.
absl::StatusOr<ShimContents> MergeShimContents(std::vector<absl::StatusOr<ShimContents>> found,
                                               bool local_expected);

}  // namespace horovodd::daemon
