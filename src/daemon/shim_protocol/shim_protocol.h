// The framing of the daemon <-> horovodd-shim protocol (proto/shim.proto):
// each message is a 4-byte big-endian length and the serialized protobuf.
// Both ends use these helpers on a connected unix stream socket; neither
// side trusts the other's lengths beyond kMaxFrameBytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"

namespace horovodd::shim {

// The version this build speaks. 1: Hello/Welcome, Launch, Signal, Release,
// Output, Exited. A daemon accepts a shim whose version is at least
// kOldestProtocolVersion; bump kProtocolVersion for additions that old peers
// can ignore (new fields, new oneof cases), and kOldestProtocolVersion only
// when the meaning of something old changes.
inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr uint32_t kOldestProtocolVersion = 1;

// A frame is refused beyond this (an env of a few MiB fits; a line is at
// most 64 KiB).
inline constexpr size_t kMaxFrameBytes = 16 << 20;

// The length prefix and the message, ready to write.
std::string EncodeFrame(const google::protobuf::MessageLite& message);

// Writes all of `bytes` to the blocking socket `fd` (retrying EINTR and short
// writes, no SIGPIPE). UNAVAILABLE once the peer is gone.
absl::Status WriteAll(int fd, const std::string& bytes);

// Collects bytes read from a stream and cuts them into frames.
class FrameReader {
 public:
  void Append(const char* data, size_t size) { buffer_.append(data, size); }
  // The next whole frame's payload, if one has arrived. INVALID_ARGUMENT
  // (and nothing more from this stream) for a length over kMaxFrameBytes.
  absl::StatusOr<std::optional<std::string>> Next();

 private:
  std::string buffer_;
  size_t offset_ = 0;
};

// Reads from `fd` (blocking) until one frame is whole, parses it into
// `message`. `reader` keeps what was read beyond it. UNAVAILABLE at EOF,
// INVALID_ARGUMENT for a bad frame.
absl::Status ReadMessage(int fd, FrameReader& reader, google::protobuf::MessageLite& message);

// Whether a unix socket can be made at `path`: INVALID_ARGUMENT when it is empty, or when
// even its directory-relative form (used for paths longer than sun_path's 107 bytes) does
// not fit; FAILED_PRECONDITION when that directory cannot be opened.
absl::Status CheckSocketPath(const std::string& path);

// A connected socket to the shim listening at `path`, or UNAVAILABLE naming
// the path (no such socket, nobody listening).
absl::StatusOr<int> ConnectUnix(const std::string& path);

// A listening socket at `path` (an old socket file there is replaced).
absl::StatusOr<int> ListenUnix(const std::string& path);

}  // namespace horovodd::shim
