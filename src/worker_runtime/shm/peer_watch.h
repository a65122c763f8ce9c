// Notices that a local peer process exited, as an event rather than by
// polling from the waits: one thread per watch poll()s a pidfd per peer
// (readable once the process has exited, zombie or reaped) and an eventfd
// that the destructor writes to stop it. The first peer seen gone is
// reported once, from that thread; then the thread ends.
//
// Where pidfd_open is refused (Linux before 5.3, a seccomp filter) the
// thread looks at those peers with kill(pid, 0) every kFallbackCheck
// instead; the waits stay event-driven either way.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace horovodd::internal::shm {

inline constexpr absl::Duration kFallbackCheck = absl::Milliseconds(50);

class PeerWatch {
 public:
  // Watches pids[i] for every i whose pid is neither <= 0 nor this
  // process's; on_exit(i) runs on the watch's thread for the first of them
  // that exits (at once if it is already gone). Null when there is no one
  // to watch or no thread could be started (then nothing is reported).
  static std::unique_ptr<PeerWatch> Start(const std::vector<pid_t>& pids,
                                          std::function<void(int index)> on_exit);
  // Stops the thread and waits for it: on_exit is not running afterwards.
  // In a child forked after Start there is no thread to stop, and the stop
  // eventfd is shared with the parent's watch: it is left alone.
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // How many processes it watches.
  size_t size() const { return peers_.size(); }

 private:
  struct Peer {
    int index;
    pid_t pid;
    int pidfd;  // -1: checked with kill(pid, 0)
  };
  PeerWatch(std::vector<Peer> peers, int stop_fd, std::function<void(int)> on_exit);
  void Run();
  // The index of a peer that is gone, or -1 (the fallback check).
  int GoneWithoutPidfd() const;

  const pid_t owner_;  // the process whose thread watches
  const std::vector<Peer> peers_;
  const int stop_fd_;  // an eventfd
  const std::function<void(int)> on_exit_;
  std::thread thread_;
};

}  // namespace horovodd::internal::shm
