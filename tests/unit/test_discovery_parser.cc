// Parsing host lists: discovery script output, --hosts, hostfiles.
#include <catch2/catch.hpp>

#include <string>

#include "discovery/host_parser.h"
#include "discovery/host_set.h"

namespace horovodd::discovery {
namespace {

using Catch::Matchers::Contains;

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

template <typename T>
std::string MessageOf(const absl::StatusOr<T>& result) {
  return MessageOf(result.status());
}

TEST_CASE("script output: comments, blank lines, whitespace and default slots, in listed order",
          "[parser]") {
  const auto hosts = ParseHostLines(
      "# hosts from the inventory\n"
      "\n"
      "  node-b:4   \n"
      "node-a   # slots from the default\n"
      "\t10.0.0.7:2\r\n"
      "   \n"
      "gpu_host.example.com:8",
      2);
  REQUIRE(hosts.ok());
  // The order ranks are given in, as in Horovod: the first host listed gets rank 0.
  CHECK(*hosts ==
        HostSet{{"node-b", 4}, {"node-a", 2}, {"10.0.0.7", 2}, {"gpu_host.example.com", 8}});
  CHECK(TotalSlots(*hosts) == 16);
}

TEST_CASE("script output with no hosts is an empty set, not an error", "[parser]") {
  for (const char* text : {"", "\n\n", "# every host is gone\n"}) {
    const auto hosts = ParseHostLines(text, 1);
    REQUIRE(hosts.ok());
    CHECK(hosts->empty());
  }
}

TEST_CASE("the same host twice collapses when the slots agree", "[parser]") {
  const auto hosts = ParseHostLines("b\na:2\nb:1\na:2\n", 1);
  REQUIRE(hosts.ok());
  CHECK(*hosts == HostSet{{"b", 1}, {"a", 2}});  // where each was first listed
}

TEST_CASE("the same host with different slots names the host and the line", "[parser]") {
  const auto hosts = ParseHostLines("a:2\nb:1\n\na:4\n", 1);
  REQUIRE(hosts.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(MessageOf(hosts), Contains("line 4 \"a:4\"") &&
                                   Contains("host a is listed with 2 slots and again with 4"));
}

TEST_CASE("bad slot counts reject the whole output", "[parser]") {
  const std::string bad_slots = GENERATE("a:0", "a:x", "a:-1", "a:99999", "a:", "a:+2", "a: 2",
                                         "a:2:3", "a:1.5", "a:99999999999999999999");
  const auto hosts = ParseHostLines("good:1\n" + bad_slots + "\n", 1);
  INFO(bad_slots);
  REQUIRE(hosts.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(MessageOf(hosts), Contains("line 2 \"" + bad_slots + "\"") &&
                                   Contains("is not an integer in [1, 4096]"));
}

TEST_CASE("the slot range ends at 4096", "[parser]") {
  const auto hosts = ParseHostLines("a:4096\nb:1\nc:0001\n", 1);
  REQUIRE(hosts.ok());
  CHECK(*hosts == HostSet{{"a", 4096}, {"b", 1}, {"c", 1}});
  CHECK_FALSE(ParseHostLines("a:4097", 1).ok());
}

TEST_CASE("text that is not a host list is rejected with the line", "[parser]") {
  const auto hosts = ParseHostLines("node-a:2\noops this is not a host\n", 1);
  REQUIRE(hosts.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(MessageOf(hosts),
             Contains("line 2 \"oops this is not a host\"") && Contains("contains \" \""));
}

TEST_CASE("host names are checked", "[parser]") {
  SECTION("a leading '-' could pass for an ssh option") {
    const auto hosts = ParseHostLines("-oProxyCommand=x", 1);
    REQUIRE_FALSE(hosts.ok());
    CHECK_THAT(MessageOf(hosts), Contains("starts with '-'"));
  }
  SECTION("shell and control characters") {
    for (const char* line : {"a;b", "a$(id)", "a/b", "a\x01"}) {
      INFO(line);
      CHECK(ParseHostLines(line, 1).status().code() == absl::StatusCode::kInvalidArgument);
    }
  }
  SECTION("an empty name before the colon") {
    CHECK_THAT(MessageOf(ParseHostLines(":4", 1)), Contains("host name is empty"));
  }
  SECTION("longer than DNS allows") {
    CHECK_THAT(MessageOf(ParseHostLines(std::string(254, 'a'), 1)), Contains("longer than 253"));
    CHECK(ParseHostLines(std::string(253, 'a'), 1).ok());
  }
}

TEST_CASE("a huge bad line is quoted short in the error", "[parser]") {
  const auto hosts = ParseHostLines(std::string(100000, 'x') + " y", 1);
  REQUIRE_FALSE(hosts.ok());
  CHECK_THAT(MessageOf(hosts), Contains("line 1 \"xxxx") && Contains("...\""));
  CHECK(MessageOf(hosts).size() < 400);
}

TEST_CASE("default slots must be in range", "[parser]") {
  CHECK_THAT(MessageOf(ParseHostLines("a", 0)), Contains("default slots 0 is not in [1, 4096]"));
  CHECK_THAT(MessageOf(ParseHostList("a", 5000)), Contains("default slots 5000"));
  CHECK_THAT(MessageOf(ParseHostfile("a", -1)), Contains("default slots -1"));
}

TEST_CASE("--hosts list", "[parser]") {
  SECTION("slots and defaults, spaces around entries") {
    const auto hosts = ParseHostList(" b:2, a ,c:8", 3);
    REQUIRE(hosts.ok());
    CHECK(*hosts == HostSet{{"b", 2}, {"a", 3}, {"c", 8}});
  }
  SECTION("an empty list") {
    CHECK_THAT(MessageOf(ParseHostList("  ", 1)), Contains("host list is empty"));
  }
  SECTION("an empty entry names its position") {
    const auto hosts = ParseHostList("a,,b", 1);
    REQUIRE(hosts.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(MessageOf(hosts), Contains("entry 2 \"\": host name is empty"));
  }
  SECTION("bad slots name the entry") {
    CHECK_THAT(MessageOf(ParseHostList("a:1,b:0", 1)), Contains("entry 2 \"b:0\""));
  }
  SECTION("conflicting duplicates") {
    CHECK_THAT(MessageOf(ParseHostList("a:1,a:2", 1)),
               Contains("host a is listed with 1 slots and again with 2"));
  }
}

TEST_CASE("FormatHostSet prints what ParseHostList reads", "[parser]") {
  const HostSet hosts{{"a", 1}, {"b.example", 4}};
  CHECK(FormatHostSet(hosts) == "a:1,b.example:4");
  const auto parsed = ParseHostList(FormatHostSet(hosts), 7);
  REQUIRE(parsed.ok());
  CHECK(*parsed == hosts);
  CHECK(FormatHostSet({}) == "");
}

TEST_CASE("hostfile formats", "[parser]") {
  SECTION("slots=N, host:N, bare host, comments and blank lines") {
    const auto hosts = ParseHostfile(
        "# training cluster\n"
        "worker-1 slots=4\n"
        "worker-2    slots = 2   # rack 3\n"
        "\n"
        "worker-3:8\n"
        "worker-4\n",
        1);
    REQUIRE(hosts.ok());
    CHECK(*hosts == HostSet{{"worker-1", 4}, {"worker-2", 2}, {"worker-3", 8}, {"worker-4", 1}});
  }
  SECTION("bad slots") {
    const auto hosts = ParseHostfile("a slots=2\nb slots=0\n", 1);
    REQUIRE(hosts.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(MessageOf(hosts), Contains("line 2 \"b slots=0\"") && Contains("[1, 4096]"));
  }
  SECTION("an unknown key") {
    CHECK_THAT(MessageOf(ParseHostfile("a max_slots=4\n", 1)),
               Contains("line 1") && Contains("expected \"slots=N\" after the host name"));
  }
  SECTION("slots given twice") {
    CHECK_THAT(MessageOf(ParseHostfile("a:2 slots=4\n", 1)), Contains("given both"));
  }
  SECTION("no hosts at all") {
    CHECK_THAT(MessageOf(ParseHostfile("# nothing here\n\n", 1)),
               Contains("hostfile lists no hosts"));
  }
  SECTION("conflicting duplicates across formats") {
    CHECK_THAT(MessageOf(ParseHostfile("a slots=2\na:3\n", 1)),
               Contains("line 2 \"a:3\": host a is listed with 2 slots and again with 3"));
  }
}

}  // namespace
}  // namespace horovodd::discovery
