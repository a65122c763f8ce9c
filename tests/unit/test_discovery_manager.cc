// The host manager: cooldowns after failures, drain/undrain, lost hosts. Time is injected.
#include <catch2/catch.hpp>

#include <string>

#include "discovery/host_manager.h"

namespace horovodd::discovery {
namespace {

using Catch::Matchers::Contains;

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

HostInfo InfoOf(const HostManager& manager, const std::string& host, absl::Time now) {
  for (const HostInfo& info : manager.Hosts(now)) {
    if (info.host == host) return info;
  }
  FAIL("host " << host << " is not known to the manager");
  return {};
}

bool IsKnown(const HostManager& manager, const std::string& host) {
  for (const HostInfo& info : manager.Hosts(kStart)) {
    if (info.host == host) return true;
  }
  return false;
}

TEST_CASE("discovered hosts are usable", "[manager]") {
  HostManager manager(CooldownPolicy{});
  const HostDiff diff = manager.UpdateDiscovered({{"a", 2}, {"b", 4}});
  CHECK(diff.added == std::vector<std::string>{"a", "b"});
  CHECK(manager.UsableHosts(kStart) == HostSet{{"a", 2}, {"b", 4}});
  CHECK(InfoOf(manager, "a", kStart).state == HostState::kUsable);
  CHECK(manager.NextCooldownEnd(kStart) == absl::InfiniteFuture());
}

TEST_CASE("cooldown is LO * 2^n on the n-th blacklisting, within [LO, HI]", "[manager]") {
  // Horovod's back-off (without its random jitter).
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.UpdateDiscovered({{"a", 2}});
  absl::Time now = kStart;
  int n = 0;
  for (int expected : {20, 40, 80, 160, 300, 300}) {
    CHECK(manager.ReportFailure("a", "worker exited with status 1", now) ==
          absl::Seconds(expected));
    const HostInfo info = InfoOf(manager, "a", now);
    CHECK(info.state == HostState::kCooldown);
    CHECK(info.cooldown_left == absl::Seconds(expected));
    CHECK(info.cooldowns == ++n);
    now += absl::Seconds(expected);  // back, then failing again
  }
  CHECK(InfoOf(manager, "a", now).failures == 6);
}

TEST_CASE("failures during a running cooldown are one incident", "[manager]") {
  // Two workers of one host failing together do not double its cooldown.
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.UpdateDiscovered({{"a", 2}});
  CHECK(manager.ReportFailure("a", "rank 0 exited with status 1", kStart) == absl::Seconds(20));
  CHECK(manager.ReportFailure("a", "rank 1 exited with status 1", kStart + absl::Seconds(1)) ==
        absl::Seconds(19));
  const HostInfo info = InfoOf(manager, "a", kStart + absl::Seconds(1));
  CHECK(info.cooldowns == 1);
  CHECK(info.failures == 2);
  CHECK(info.last_failure == "rank 1 exited with status 1");
}

TEST_CASE("hosts keep the order they were listed in; new ones are appended", "[manager]") {
  HostManager manager(CooldownPolicy{});
  manager.UpdateDiscovered({{"z", 1}, {"a", 1}});
  CHECK(manager.UsableHosts(kStart) == HostSet{{"z", 1}, {"a", 1}});
  // A later listing in another order keeps the known hosts' places (the oldest
  // hosts keep the lowest ranks, as in Horovod).
  manager.UpdateDiscovered({{"m", 2}, {"a", 1}, {"z", 1}});
  CHECK(manager.UsableHosts(kStart) == HostSet{{"z", 1}, {"a", 1}, {"m", 2}});
  manager.UpdateDiscovered({{"m", 2}, {"a", 1}});
  CHECK(manager.UsableHosts(kStart) == HostSet{{"a", 1}, {"m", 2}});
  std::vector<std::string> all;
  for (const HostInfo& h : manager.Hosts(kStart)) all.push_back(h.host);
  CHECK(all == std::vector<std::string>{"a", "m", "z"});  // z, lost, last
}

TEST_CASE("a host becomes usable again when its cooldown ends", "[manager]") {
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.UpdateDiscovered({{"a", 2}, {"b", 2}});
  manager.ReportFailure("a", "rank 3 lost its connection", kStart);

  CHECK(manager.UsableHosts(kStart) == HostSet{{"b", 2}});
  CHECK(manager.NextCooldownEnd(kStart) == kStart + absl::Seconds(20));

  const absl::Time almost = kStart + absl::Seconds(19);
  CHECK(manager.UsableHosts(almost) == HostSet{{"b", 2}});
  const HostInfo benched = InfoOf(manager, "a", almost);
  CHECK(benched.cooldown_left == absl::Seconds(1));
  CHECK(benched.last_failure == "rank 3 lost its connection");

  const absl::Time over = kStart + absl::Seconds(20);
  CHECK(manager.UsableHosts(over) == HostSet{{"a", 2}, {"b", 2}});
  CHECK(InfoOf(manager, "a", over).state == HostState::kUsable);
  CHECK(InfoOf(manager, "a", over).cooldown_left == absl::ZeroDuration());
  CHECK(manager.NextCooldownEnd(over) == absl::InfiniteFuture());
}

TEST_CASE("the next cooldown end is the earliest one", "[manager]") {
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.UpdateDiscovered({{"a", 1}, {"b", 1}});
  manager.ReportFailure("a", "x", kStart - absl::Seconds(20));
  manager.ReportFailure("a", "x", kStart);                     // the second time: 40 s
  manager.ReportFailure("b", "x", kStart + absl::Seconds(5));  // ends at 25 s
  CHECK(manager.NextCooldownEnd(kStart) == kStart + absl::Seconds(25));
  CHECK(manager.NextCooldownEnd(kStart + absl::Seconds(25)) == kStart + absl::Seconds(40));
}

TEST_CASE("an infinite cooldown blacklists for good", "[manager]") {
  HostManager manager(CooldownPolicy{absl::InfiniteDuration(), absl::InfiniteDuration()});
  manager.UpdateDiscovered({{"a", 1}});
  manager.ReportFailure("a", "x", kStart);
  manager.ReportFailure("a", "x", kStart);
  CHECK(manager.UsableHosts(kStart + absl::Hours(24 * 365)).empty());
  CHECK(manager.NextCooldownEnd(kStart) == absl::InfiniteFuture());
}

TEST_CASE("drain and undrain", "[manager]") {
  HostManager manager(CooldownPolicy{});
  manager.UpdateDiscovered({{"a", 2}, {"b", 2}});

  manager.Drain("a");
  CHECK(manager.UsableHosts(kStart) == HostSet{{"b", 2}});
  CHECK(InfoOf(manager, "a", kStart).state == HostState::kDrained);

  SECTION("undrain makes it usable") {
    manager.Undrain("a");
    CHECK(manager.UsableHosts(kStart) == HostSet{{"a", 2}, {"b", 2}});
  }
  SECTION("a drain outlives loss and rediscovery") {
    manager.UpdateDiscovered({{"b", 2}});
    CHECK(InfoOf(manager, "a", kStart).state == HostState::kLost);
    manager.UpdateDiscovered({{"a", 2}, {"b", 2}});
    CHECK(InfoOf(manager, "a", kStart).state == HostState::kDrained);
    CHECK(manager.UsableHosts(kStart) == HostSet{{"b", 2}});
  }
  SECTION("a drained host's cooldown wakes nobody, and still shows") {
    manager.ReportFailure("a", "x", kStart);
    CHECK(manager.NextCooldownEnd(kStart) == absl::InfiniteFuture());
    CHECK(InfoOf(manager, "a", kStart).cooldown_left == absl::Seconds(20));
    manager.Undrain("a");
    CHECK(InfoOf(manager, "a", kStart).state == HostState::kCooldown);
    CHECK(manager.NextCooldownEnd(kStart) == kStart + absl::Seconds(20));
  }
}

TEST_CASE("a host drained before it is discovered stays out", "[manager]") {
  HostManager manager(CooldownPolicy{});
  manager.Drain("c");
  CHECK(InfoOf(manager, "c", kStart).state == HostState::kLost);
  manager.UpdateDiscovered({{"c", 4}});
  CHECK(InfoOf(manager, "c", kStart).state == HostState::kDrained);
  CHECK(manager.UsableHosts(kStart).empty());
  manager.Undrain("never-seen");
  CHECK_FALSE(IsKnown(manager, "never-seen"));
}

TEST_CASE("lost hosts keep their history", "[manager]") {
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.UpdateDiscovered({{"a", 2}, {"b", 2}});
  manager.ReportFailure("a", "worker killed by signal 9", kStart);

  const HostDiff lost = manager.UpdateDiscovered({{"b", 2}});
  CHECK(lost.removed == std::vector<std::string>{"a"});
  const HostInfo info = InfoOf(manager, "a", kStart);
  CHECK(info.state == HostState::kLost);
  CHECK(info.slots == 2);
  CHECK(info.failures == 1);
  CHECK(manager.UsableHosts(kStart) == HostSet{{"b", 2}});
  CHECK(manager.NextCooldownEnd(kStart) == absl::InfiniteFuture());

  SECTION("back within its cooldown, it cools down") {
    const HostDiff back = manager.UpdateDiscovered({{"a", 4}, {"b", 2}});
    CHECK(back.added == std::vector<std::string>{"a"});
    CHECK(InfoOf(manager, "a", kStart).state == HostState::kCooldown);
    CHECK(InfoOf(manager, "a", kStart).slots == 4);
    // Back after the others: it comes after them in the assignment order.
    CHECK(manager.UsableHosts(kStart + absl::Seconds(20)) == HostSet{{"b", 2}, {"a", 4}});
  }
  SECTION("a further failure while lost, after its cooldown, still doubles") {
    manager.ReportFailure("a", "late report", kStart + absl::Seconds(20));
    CHECK(InfoOf(manager, "a", kStart + absl::Seconds(20)).cooldown_left == absl::Seconds(40));
  }
}

TEST_CASE("resizing a host is reported and used", "[manager]") {
  HostManager manager(CooldownPolicy{});
  manager.UpdateDiscovered({{"a", 2}});
  const HostDiff diff = manager.UpdateDiscovered({{"a", 8}});
  CHECK(diff.resized == std::vector<HostSlots>{{"a", 8}});
  CHECK(manager.UsableHosts(kStart) == HostSet{{"a", 8}});
  CHECK(manager.UpdateDiscovered({{"a", 8}}).empty());
}

TEST_CASE("a failure on a host never discovered is remembered", "[manager]") {
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.ReportFailure("ghost", "x", kStart);
  CHECK(InfoOf(manager, "ghost", kStart).state == HostState::kLost);
  manager.UpdateDiscovered({{"ghost", 1}});
  CHECK(InfoOf(manager, "ghost", kStart).state == HostState::kCooldown);
}

TEST_CASE("lost hosts are forgotten beyond the cap, drained ones last", "[manager]") {
  HostManager manager(CooldownPolicy{});
  HostSet first;
  for (size_t i = 0; i < kMaxRememberedLostHosts + 10; ++i) {
    first.push_back({"host" + std::to_string(100000 + i), 1});
  }
  manager.UpdateDiscovered(first);
  manager.Drain(first[0].host);
  manager.UpdateDiscovered({{"survivor", 1}});

  // Lost: kMaxRememberedLostHosts + 10, of which the 10 untouched longest go, but not the
  // drained one.
  CHECK(manager.Hosts(kStart).size() == kMaxRememberedLostHosts + 1);
  CHECK(IsKnown(manager, first[0].host));
  CHECK(IsKnown(manager, "survivor"));
  CHECK(IsKnown(manager, first.back().host));
  int forgotten = 0;
  for (const HostSlots& h : first) forgotten += IsKnown(manager, h.host) ? 0 : 1;
  CHECK(forgotten == 10);
}

TEST_CASE("cooldown policy validation names the bad field", "[manager]") {
  CHECK(ValidateCooldownPolicy(CooldownPolicy{}).ok());
  CHECK(ValidateCooldownPolicy({absl::ZeroDuration(), absl::ZeroDuration()}).ok());
  const absl::Status negative = ValidateCooldownPolicy({absl::Seconds(-1), absl::Seconds(5)});
  CHECK(negative.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(negative.message()), Contains("cooldown min -1s is negative"));
  const absl::Status inverted = ValidateCooldownPolicy({absl::Seconds(10), absl::Seconds(5)});
  CHECK_THAT(std::string(inverted.message()),
             Contains("cooldown max 5s is below cooldown min 10s"));
}

TEST_CASE("host state names", "[manager]") {
  CHECK(std::string(HostStateName(HostState::kUsable)) == "usable");
  CHECK(std::string(HostStateName(HostState::kCooldown)) == "cooldown");
  CHECK(std::string(HostStateName(HostState::kDrained)) == "drained");
  CHECK(std::string(HostStateName(HostState::kLost)) == "lost");
}

}  // namespace
}  // namespace horovodd::discovery
