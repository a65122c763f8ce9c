// One generation's shared memory on one host: an anonymous memfd that the
// local leader creates and maps, and its local peers map by opening
// /proc/<leader pid>/fd/<fd> (the same file, not a copy). The file has no
// name anywhere: nothing is left in /dev/shm whichever process dies when;
// the memory goes with the last mapping.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace horovodd::internal::shm {

class SharedSegment {
 public:
  // A fresh zero-filled segment of `bytes`, mapped; fd() stays open until
  // CloseFd() so peers can open it.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Create(size_t bytes);
  // Maps the segment that process `owner` holds open as descriptor `fd`.
  // FAILED_PRECONDITION when it cannot be opened (another machine, another
  // user, the owner gone) or is not `bytes` long.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> OpenPeer(pid_t owner, int fd, size_t bytes);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  int fd() const { return fd_; }
  // Once every peer has mapped the segment the descriptor is not needed.
  void CloseFd();

 private:
  SharedSegment(uint8_t* data, size_t bytes, int fd) : data_(data), bytes_(bytes), fd_(fd) {}
  uint8_t* data_;
  size_t bytes_;
  int fd_;
};

// A number that differs between two boots or two machines (a hash of
// /proc/sys/kernel/random/boot_id), so peers that think they share a host
// can check it; 0 when unknown.
int64_t BootId();

}  // namespace horovodd::internal::shm
