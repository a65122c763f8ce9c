#include "worker_runtime/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace horovodd::internal::shm {
namespace {

std::string Errno() { return std::strerror(errno); }

absl::StatusOr<uint8_t*> Map(int fd, size_t bytes) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mapping ", bytes, " bytes of shared memory failed: ", Errno()));
  }
  return static_cast<uint8_t*>(data);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Create(size_t bytes) {
  const int fd = memfd_create("horovodd-shm", MFD_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("memfd_create failed: ", Errno()));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string why = Errno();
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("sizing a shared segment to ", bytes, " bytes failed: ", why));
  }
  absl::StatusOr<uint8_t*> data = Map(fd, bytes);
  if (!data.ok()) {
    close(fd);
    return data.status();
  }
  return std::unique_ptr<SharedSegment>(new SharedSegment(*data, bytes, fd));
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::OpenPeer(pid_t owner, int fd,
                                                                       size_t bytes) {
  const std::string path = absl::StrCat("/proc/", owner, "/fd/", fd);
  const int own = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (own < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("opening the local leader's segment ", path, " failed: ", Errno()));
  }
  struct stat info {};
  if (fstat(own, &info) != 0 || static_cast<size_t>(info.st_size) != bytes) {
    close(own);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not the ", bytes, "-byte segment the local leader announced"));
  }
  absl::StatusOr<uint8_t*> data = Map(own, bytes);
  // The mapping keeps the memory; our descriptor is not needed.
  close(own);
  if (!data.ok()) return data.status();
  return std::unique_ptr<SharedSegment>(new SharedSegment(*data, bytes, -1));
}

SharedSegment::~SharedSegment() {
  munmap(data_, bytes_);
  CloseFd();
}

void SharedSegment::CloseFd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int64_t BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return 0;
  return static_cast<int64_t>(std::hash<std::string>()(id) & 0x7fffffffffffffffULL);
}

}  // namespace horovodd::internal::shm
