#include "daemon/shim_protocol/shim_protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"

namespace horovodd::shim {
namespace {

absl::Status ErrnoStatus(absl::StatusCode code, absl::string_view what) {
  return absl::Status(code, absl::StrCat(what, ": ", strerror(errno)));
}

// The address of the unix socket at `path`. sun_path holds 107 bytes, less than a deep state
// dir needs (a test's temp dir, a home directory): a longer path is reached through its
// directory instead, "/proc/self/fd/<dir>/<name>", which bind and connect resolve as they
// would the path itself. `dir` keeps that directory open while the address is used.
struct UnixAddress {
  sockaddr_un addr{};
  daemon::UniqueFd dir;
};

absl::StatusOr<UnixAddress> AddressOf(const std::string& path) {
  UnixAddress address;
  address.addr.sun_family = AF_UNIX;
  constexpr size_t kCapacity = sizeof(address.addr.sun_path);
  if (path.empty()) return absl::InvalidArgumentError("shim socket path is empty");
  std::string reachable = path;
  if (path.size() >= kCapacity) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    address.dir.Reset(open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!address.dir.valid()) {
      return ErrnoStatus(absl::StatusCode::kFailedPrecondition,
                         absl::StrCat("cannot open the shim socket's directory ", dir));
    }
    reachable = absl::StrCat("/proc/self/fd/", address.dir.get(), "/", name);
    if (name.empty() || reachable.size() >= kCapacity) {
      return absl::InvalidArgumentError(absl::StrCat("shim socket name '", name, "' in ", dir,
                                                     " is empty or too long for a unix socket"));
    }
  }
  memcpy(address.addr.sun_path, reachable.data(), reachable.size());
  return address;
}

}  // namespace

std::string EncodeFrame(const google::protobuf::MessageLite& message) {
  const std::string payload = message.SerializeAsString();
  const uint32_t size = static_cast<uint32_t>(payload.size());
  std::string frame;
  frame.reserve(4 + payload.size());
  frame.push_back(static_cast<char>(size >> 24));
  frame.push_back(static_cast<char>(size >> 16));
  frame.push_back(static_cast<char>(size >> 8));
  frame.push_back(static_cast<char>(size));
  frame += payload;
  return frame;
}

absl::Status WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StatusCode::kUnavailable, "shim connection");
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> FrameReader::Next() {
  const size_t available = buffer_.size() - offset_;
  if (available < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  const uint32_t size = uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
  if (size > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("shim frame of ", size, " bytes is over the limit of ", kMaxFrameBytes));
  }
  if (available < 4 + size) return std::nullopt;
  std::string payload = buffer_.substr(offset_ + 4, size);
  offset_ += 4 + size;
  if (offset_ > buffer_.size() / 2) {  // keep the buffer from growing without bound
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  return payload;
}

absl::Status ReadMessage(int fd, FrameReader& reader, google::protobuf::MessageLite& message) {
  char chunk[64 * 1024];
  while (true) {
    absl::StatusOr<std::optional<std::string>> frame = reader.Next();
    if (!frame.ok()) return frame.status();
    if (frame->has_value()) {
      if (!message.ParseFromString(**frame)) {
        return absl::InvalidArgumentError("malformed shim message");
      }
      return absl::OkStatus();
    }
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(absl::StatusCode::kUnavailable, "shim connection");
    }
    if (n == 0) return absl::UnavailableError("shim connection closed");
    reader.Append(chunk, static_cast<size_t>(n));
  }
}

absl::Status CheckSocketPath(const std::string& path) { return AddressOf(path).status(); }

absl::StatusOr<int> ConnectUnix(const std::string& path) {
  absl::StatusOr<UnixAddress> address = AddressOf(path);
  if (!address.ok()) return address.status();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(absl::StatusCode::kInternal, "cannot create a unix socket");
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address->addr), sizeof(address->addr)) != 0) {
    absl::Status status =
        ErrnoStatus(absl::StatusCode::kUnavailable, absl::StrCat("cannot reach shim at ", path));
    close(fd);
    return status;
  }
  return fd;
}

absl::StatusOr<int> ListenUnix(const std::string& path) {
  absl::StatusOr<UnixAddress> address = AddressOf(path);
  if (!address.ok()) return address.status();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(absl::StatusCode::kInternal, "cannot create a unix socket");
  unlink(path.c_str());
  // Only the daemon's user may talk to the shim (it starts processes): the
  // socket is made 0600 from the start, not chmod'ed after.
  const mode_t old_mask = umask(0177);
  const int bound =
      bind(fd, reinterpret_cast<const sockaddr*>(&address->addr), sizeof(address->addr));
  umask(old_mask);
  if (bound != 0 || listen(fd, 4) != 0) {
    absl::Status status =
        ErrnoStatus(absl::StatusCode::kFailedPrecondition, absl::StrCat("cannot listen on ", path));
    close(fd);
    return status;
  }
  return fd;
}

}  // namespace horovodd::shim
