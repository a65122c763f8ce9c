#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>

#include "daemon/launch/line_splitter.h"

namespace horovodd::daemon {
namespace {

// Feeds `chunks` one after another, then flushes; returns every emitted line.
std::vector<std::string> Split(const std::vector<std::string>& chunks, size_t max_line) {
  std::vector<std::string> lines;
  const LineSplitter::Emit emit = [&lines](std::string_view line) { lines.emplace_back(line); };
  LineSplitter splitter(max_line);
  for (const std::string& chunk : chunks) splitter.Feed(chunk, emit);
  splitter.Flush(emit);
  return lines;
}

TEST_CASE("LineSplitter emits complete lines without their newline", "[launcher]") {
  CHECK(Split({"a\nbb\n\nccc\n"}, 16) == std::vector<std::string>{"a", "bb", "", "ccc"});
}

TEST_CASE("LineSplitter joins a line that arrives in several chunks", "[launcher]") {
  CHECK(Split({"he", "llo wo", "rld\nne", "xt\n"}, 64) ==
        std::vector<std::string>{"hello world", "next"});
}

TEST_CASE("LineSplitter emits a last line without newline at Flush", "[launcher]") {
  CHECK(Split({"one\ntwo"}, 16) == std::vector<std::string>{"one", "two"});
  CHECK(Split({""}, 16).empty());
}

TEST_CASE("LineSplitter cuts an overlong line into max-size pieces", "[launcher]") {
  CHECK(Split({"abcdefghij\nxy\n"}, 4) == std::vector<std::string>{"abcd", "efgh", "ij", "xy"});
  // The same when the bytes trickle in one by one.
  std::vector<std::string> bytes;
  for (char c : std::string("abcdefghij\nxy\n")) bytes.emplace_back(1, c);
  CHECK(Split(bytes, 4) == std::vector<std::string>{"abcd", "efgh", "ij", "xy"});
}

TEST_CASE("LineSplitter emits a line of exactly max size once, with no empty line after",
          "[launcher]") {
  CHECK(Split({"abcd\nefgh\n"}, 4) == std::vector<std::string>{"abcd", "efgh"});
  CHECK(Split({"abcd", "\n", "efgh"}, 4) == std::vector<std::string>{"abcd", "efgh"});
  CHECK(Split({"abcdefgh\n"}, 4) == std::vector<std::string>{"abcd", "efgh"});
}

}  // namespace
}  // namespace horovodd::daemon
