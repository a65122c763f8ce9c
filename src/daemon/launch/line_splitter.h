// Cuts a byte stream (a child's stdout or stderr) into lines. Bytes arrive in
// arbitrary chunks; each complete line is handed out without its '\n'. A line
// longer than `max_line` is handed out in pieces of `max_line` bytes (the last
// piece shorter), and Flush() hands out a last line that had no '\n' (at EOF).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace horovodd::daemon {

class LineSplitter {
 public:
  static constexpr size_t kDefaultMaxLine = 64 * 1024;
  using Emit = std::function<void(std::string_view line)>;

  explicit LineSplitter(size_t max_line = kDefaultMaxLine) : max_line_(max_line) {}

  // Calls emit once per complete line (or full-size piece) found in `data`.
  void Feed(std::string_view data, const Emit& emit);
  // Calls emit for the buffered rest, if any (the stream ended without '\n').
  void Flush(const Emit& emit);

 private:
  const size_t max_line_;
  std::string partial_;  // bytes of the current line not yet handed out
};

}  // namespace horovodd::daemon
