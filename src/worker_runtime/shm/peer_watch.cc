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

std::unique_ptr<PeerWatch> PeerWatch::Start(const std::vector<pid_t>& pids,
                                            std::function<void(int)> on_exit) {
  std::vector<Peer> peers;
  const pid_t self = getpid();
  for (int i = 0; i < static_cast<int>(pids.size()); ++i) {
    if (pids[i] <= 0 || pids[i] == self) continue;
    // An ESRCH here is a peer already gone: kill(pid, 0) says so at once.
    peers.push_back(Peer{i, pids[i], PidfdOpen(pids[i])});
  }
  auto close_all = [&peers] {
    for (const Peer& p : peers) {
      if (p.pidfd >= 0) close(p.pidfd);
    }
  };
  if (peers.empty()) return nullptr;
  const int stop_fd = eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0) {
    close_all();
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

PeerWatch::PeerWatch(std::vector<Peer> peers, int stop_fd, std::function<void(int)> on_exit)
    : owner_(getpid()), peers_(std::move(peers)), stop_fd_(stop_fd), on_exit_(std::move(on_exit)) {}

PeerWatch::~PeerWatch() {
  if (getpid() != owner_) {
    // A forked child: the thread is the parent's, so there is nothing here
    // to join or detach; the handle is dropped without touching it. Closing
    // our copies of the descriptors below does not touch the parent's watch.
    if (thread_.joinable()) new std::thread(std::move(thread_));
  } else if (thread_.joinable()) {
    const uint64_t one = 1;
    // An eventfd write of 1 cannot block or fail short here.
    (void)!write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  close(stop_fd_);
  for (const Peer& p : peers_) {
    if (p.pidfd >= 0) close(p.pidfd);
  }
}

int PeerWatch::GoneWithoutPidfd() const {
  for (const Peer& p : peers_) {
    if (p.pidfd < 0 && Gone(p.pid)) return p.index;
  }
  return -1;
}

void PeerWatch::Run() {
  std::vector<pollfd> fds;
  fds.push_back(pollfd{stop_fd_, POLLIN, 0});
  bool fallback = false;
  for (const Peer& p : peers_) {
    if (p.pidfd >= 0) {
      fds.push_back(pollfd{p.pidfd, POLLIN, 0});
    } else {
      fallback = true;
    }
  }
  const int timeout_ms =
      fallback ? static_cast<int>(absl::ToInt64Milliseconds(kFallbackCheck)) : -1;
  while (true) {
    if (const int gone = GoneWithoutPidfd(); gone >= 0) {
      on_exit_(gone);
      return;
    }
    const int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) return;  // cannot watch: the op deadline still holds
    if (ready <= 0) continue;
    if (fds[0].revents != 0) return;  // stopped
    for (size_t i = 1; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      for (const Peer& p : peers_) {
        if (p.pidfd == fds[i].fd) on_exit_(p.index);
      }
      return;
    }
  }
}

}  // namespace horovodd::internal::shm
