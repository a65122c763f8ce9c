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

TEST_CASE("cooldown doubles with each failure and stops at max", "[manager]") {
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.UpdateDiscovered({{"a", 2}});
  absl::Time now = kStart;
  for (int expected : {10, 20, 40, 80, 160, 300, 300, 300}) {
    manager.ReportFailure("a", "worker exited with status 1", now);
    const HostInfo info = InfoOf(manager, "a", now);
    CHECK(info.state == HostState::kCooldown);
    CHECK(info.cooldown_left == absl::Seconds(expected));
    now += absl::Seconds(1);
  }
  CHECK(InfoOf(manager, "a", now).failures == 8);
}

TEST_CASE("a host becomes usable again when its cooldown ends", "[manager]") {
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.UpdateDiscovered({{"a", 2}, {"b", 2}});
  manager.ReportFailure("a", "rank 3 lost its connection", kStart);

  CHECK(manager.UsableHosts(kStart) == HostSet{{"b", 2}});
  CHECK(manager.NextCooldownEnd(kStart) == kStart + absl::Seconds(10));

  const absl::Time almost = kStart + absl::Seconds(9);
  CHECK(manager.UsableHosts(almost) == HostSet{{"b", 2}});
  const HostInfo benched = InfoOf(manager, "a", almost);
  CHECK(benched.cooldown_left == absl::Seconds(1));
  CHECK(benched.last_failure == "rank 3 lost its connection");

  const absl::Time over = kStart + absl::Seconds(10);
  CHECK(manager.UsableHosts(over) == HostSet{{"a", 2}, {"b", 2}});
  CHECK(InfoOf(manager, "a", over).state == HostState::kUsable);
  CHECK(InfoOf(manager, "a", over).cooldown_left == absl::ZeroDuration());
  CHECK(manager.NextCooldownEnd(over) == absl::InfiniteFuture());
}

TEST_CASE("the next cooldown end is the earliest one", "[manager]") {
  HostManager manager(CooldownPolicy{absl::Seconds(10), absl::Seconds(300)});
  manager.UpdateDiscovered({{"a", 1}, {"b", 1}});
  manager.ReportFailure("a", "x", kStart);
  manager.ReportFailure("a", "x", kStart);  // 20 s
  manager.ReportFailure("b", "x", kStart + absl::Seconds(5));  // ends at 15 s
  CHECK(manager.NextCooldownEnd(kStart) == kStart + absl::Seconds(15));
  CHECK(manager.NextCooldownEnd(kStart + absl::Seconds(15)) == kStart + absl::Seconds(20));
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
    CHECK(InfoOf(manager, "a", kStart).cooldown_left == absl::Seconds(10));
    manager.Undrain("a");
    CHECK(InfoOf(manager, "a", kStart).state == HostState::kCooldown);
    CHECK(manager.NextCooldownEnd(kStart) == kStart + absl::Seconds(10));
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
    CHECK(manager.UsableHosts(kStart + absl::Seconds(10)) == HostSet{{"a", 4}, {"b", 2}});
  }
  SECTION("a further failure while lost still doubles") {
    manager.ReportFailure("a", "late report", kStart);
    CHECK(InfoOf(manager, "a", kStart).cooldown_left == absl::Seconds(20));
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
