#include "worker_runtime/shm/peer_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>

namespace horovodd::internal::shm {
namespace {

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

bool Gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

PeerWatch::Peers PeerWatch::OpenPeers(const std::vector<pid_t>& pids) {
  Peers peers;
  const pid_t self = getpid();
  for (int i = 0; i < static_cast<int>(pids.size()); ++i) {
    if (pids[i] <= 0 || pids[i] == self) continue;
    // An ESRCH here is a peer already gone: kill(pid, 0) says so at once.
    peers.push_back(Peer{i, pids[i], PidfdOpen(pids[i])});
  }
  return peers;
}

void PeerWatch::ClosePeers(const Peers& peers) {
  for (const Peer& p : peers) {
    if (p.pidfd >= 0) close(p.pidfd);
  }
}

std::unique_ptr<PeerWatch> PeerWatch::Start(const std::vector<pid_t>& pids,
                                            std::function<void(int)> on_exit) {
  Peers peers = OpenPeers(pids);
  if (peers.empty()) return nullptr;
  const int stop_fd = eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0) {
    ClosePeers(peers);
    return nullptr;
  }
  std::unique_ptr<PeerWatch> watch(new PeerWatch(std::move(peers), stop_fd, std::move(on_exit)));
  try {
    watch->thread_ = std::thread([w = watch.get()] { w->Run(); });
  } catch (const std::system_error&) {
    return nullptr;  // the destructor closes the descriptors
  }
  return watch;
}

PeerWatch::PeerWatch(Peers peers, int stop_fd, std::function<void(int)> on_exit)
    : owner_(getpid()),
      stop_fd_(stop_fd),
      on_exit_(std::move(on_exit)),
      size_(peers.size()),
      peers_(std::make_unique<Peers>(std::move(peers))) {}

PeerWatch::~PeerWatch() {
  if (getpid() != owner_) {
    // A forked child: the thread is the parent's, so there is nothing here
    // to join or detach; the handle is dropped without touching it. Closing
    // our copy of the eventfd does not touch the parent's watch. The sets
    // are left as they are (their pidfds are close-on-exec): the parent's
    // thread may have been changing them at the fork.
    if (thread_.joinable()) new std::thread(std::move(thread_));
    (void)peers_.release();
    close(stop_fd_);
    return;
  }
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_release);
    Ring();
    thread_.join();
  }
  close(stop_fd_);
  ClosePeers(*peers_);
  if (std::unique_ptr<Peers> next{next_.exchange(nullptr)}; next != nullptr) ClosePeers(*next);
}

void PeerWatch::Ring() const {
  const uint64_t one = 1;
  // An eventfd write of 1 cannot block or fail short here.
  (void)!write(stop_fd_, &one, sizeof(one));
}

void PeerWatch::Rewatch(const std::vector<pid_t>& pids) {
  auto peers = std::make_unique<Peers>(OpenPeers(pids));
  size_.store(peers->size(), std::memory_order_relaxed);
  // A set handed over before and not taken yet is dropped unseen.
  if (std::unique_ptr<Peers> unseen{next_.exchange(peers.release(), std::memory_order_acq_rel)};
      unseen != nullptr) {
    ClosePeers(*unseen);
  }
  Ring();
}

int PeerWatch::GoneWithoutPidfd(const Peers& peers) {
  for (const Peer& p : peers) {
    if (p.pidfd < 0 && Gone(p.pid)) return p.index;
  }
  return -1;
}

void PeerWatch::Run() {
  std::vector<pollfd> fds;
  int timeout_ms = -1;
  // Takes a set Rewatch handed over, if any; false once the watch stops.
  const auto take_next = [&] {
    if (stopping_.load(std::memory_order_acquire)) return false;
    if (std::unique_ptr<Peers> next{next_.exchange(nullptr, std::memory_order_acq_rel)};
        next != nullptr) {
      ClosePeers(*peers_);
      peers_ = std::move(next);
    }
    fds.assign(1, pollfd{stop_fd_, POLLIN, 0});
    bool fallback = false;
    for (const Peer& p : *peers_) {
      if (p.pidfd >= 0) {
        fds.push_back(pollfd{p.pidfd, POLLIN, 0});
      } else {
        fallback = true;
      }
    }
    timeout_ms = fallback ? static_cast<int>(absl::ToInt64Milliseconds(kFallbackCheck)) : -1;
    return true;
  };
  if (!take_next()) return;
  while (true) {
    if (const int gone = GoneWithoutPidfd(*peers_); gone >= 0) {
      on_exit_(gone);
      return;
    }
    const int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) return;  // cannot watch: the op deadline still holds
    if (ready <= 0) continue;
    if (fds[0].revents != 0) {  // stopped, or a new set
      uint64_t rung = 0;
      (void)!read(stop_fd_, &rung, sizeof(rung));
      if (!take_next()) return;
      continue;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      for (const Peer& p : *peers_) {
        if (p.pidfd == fds[i].fd) on_exit_(p.index);
      }
      return;
    }
  }
}

}  // namespace horovodd::internal::shm
