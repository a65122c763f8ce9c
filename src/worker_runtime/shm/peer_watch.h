// Notices that a local peer process exited, as an event rather than by
// polling from the waits: one thread per watch poll()s a pidfd per peer
// (readable once the process has exited, zombie or reaped) and an eventfd
// that the destructor writes to stop it. The first peer seen gone is
// reported once, from that thread; then the thread ends. The set watched
// can be replaced while the thread runs (Rewatch), so that a process whose
// peers change during its set-up starts one thread, not one per change.
//
// Where pidfd_open is refused (Linux before 5.3, a seccomp filter) the
// thread looks at those peers with kill(pid, 0) every kFallbackCheck
// instead; the waits stay event-driven either way.
#pragma once

#include <sys/types.h>

#include <atomic>
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

  // Watches `pids` (as Start reads them) instead of the current set, on the
  // same thread. A peer of the old set that is not in the new one is no
  // longer reported. Nothing happens after on_exit ran (the thread has
  // ended); with no one left to watch, the thread waits for the next set or
  // the stop. From one thread at a time (the group's owner).
  void Rewatch(const std::vector<pid_t>& pids);

  // How many processes it watches (the last set given).
  size_t size() const { return size_.load(std::memory_order_relaxed); }

 private:
  struct Peer {
    int index;
    pid_t pid;
    int pidfd;  // -1: checked with kill(pid, 0)
  };
  using Peers = std::vector<Peer>;
  PeerWatch(Peers peers, int stop_fd, std::function<void(int)> on_exit);
  void Run();
  // Wakes the thread: to stop, or to take next_.
  void Ring() const;
  // The index of a peer in `peers` that is gone, or -1 (the fallback check).
  static int GoneWithoutPidfd(const Peers& peers);
  static Peers OpenPeers(const std::vector<pid_t>& pids);
  static void ClosePeers(const Peers& peers);

  // No mutex: a forked child drops its copy of the watch, and an
  // absl::Mutex cannot be used (nor destroyed) in a child forked while
  // another thread held a lock of absl's. The hand-over is one pointer.
  const pid_t owner_;  // the process whose thread watches
  const int stop_fd_;  // an eventfd: written to stop the thread or hand it a set
  const std::function<void(int)> on_exit_;
  std::atomic<size_t> size_;
  std::atomic<bool> stopping_{false};
  // A set handed over by Rewatch that the thread has not taken yet.
  std::atomic<Peers*> next_{nullptr};
  // The set watched: the thread's while it runs, then the destructor's.
  std::unique_ptr<Peers> peers_;
  std::thread thread_;
};

}  // namespace horovodd::internal::shm
