// Diffs between two discovered host sets.
#include <catch2/catch.hpp>

#include "discovery/host_diff.h"

namespace horovodd::discovery {
namespace {

TEST_CASE("identical host sets make an empty diff", "[diff]") {
  const HostSet hosts{{"a", 2}, {"b", 2}};
  CHECK(DiffHosts(hosts, hosts).empty());
  CHECK(DiffHosts({}, {}).empty());
}

TEST_CASE("added, removed and resized hosts", "[diff]") {
  const HostDiff diff =
      DiffHosts({{"a", 2}, {"b", 2}, {"c", 4}}, {{"b", 2}, {"c", 8}, {"d", 1}, {"e", 1}});
  CHECK_FALSE(diff.empty());
  CHECK(diff.added == std::vector<std::string>{"d", "e"});
  CHECK(diff.removed == std::vector<std::string>{"a"});
  CHECK(diff.resized == std::vector<HostSlots>{{"c", 8}});
}

TEST_CASE("every host gone, or every host new", "[diff]") {
  const HostSet hosts{{"a", 1}, {"b", 1}};
  CHECK(DiffHosts(hosts, {}).removed == std::vector<std::string>{"a", "b"});
  CHECK(DiffHosts({}, hosts).added == std::vector<std::string>{"a", "b"});
}

TEST_CASE("a hand-built unsorted set diffs like a sorted one", "[diff]") {
  const HostDiff diff = DiffHosts({{"c", 1}, {"a", 1}}, {{"b", 1}, {"a", 2}});
  CHECK(diff.added == std::vector<std::string>{"b"});
  CHECK(diff.removed == std::vector<std::string>{"c"});
  CHECK(diff.resized == std::vector<HostSlots>{{"a", 2}});
}

}  // namespace
}  // namespace horovodd::discovery
