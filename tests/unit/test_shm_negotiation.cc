// The engine's negotiation rounds in a host's shared memory
// (worker_runtime/shm/shm_negotiation.h): every rank's part reaches every
// rank, rank 0's result where it decides for the host, and aborts. Ranks are
// threads of this process, each with its own ShmGroup on one segment.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "shm_test_support.h"
#include "worker_runtime/shm/shm_group.h"
#include "worker_runtime/shm/shm_negotiation.h"

namespace horovodd {
namespace {

using internal::shm::NegotiationChannel;
using internal::shm::ShmGroup;
using testing::Deadline;
using testing::MakeGroups;
using testing::OnEveryRank;

// Rank r's part of round k: a length and bytes that differ by rank and round.
// Sizes on both sides of what a rank's front holds (224 bytes: read there)
// and far past it (read from the rank's full part).
std::string PartOf(int rank, int round) {
  constexpr size_t kSizes[] = {1, 100, 224, 225, 300, 20000};
  return std::string(kSizes[(rank * 5 + round) % 6], static_cast<char>('a' + (rank + round) % 26));
}

// Collects `round` on `channel`: "" when every rank's part is PartOf's.
std::string CollectAndCheck(NegotiationChannel& channel, int round) {
  if (absl::Status s = channel.Collect(Deadline(), [](int) {}); !s.ok()) return s.ToString();
  for (int r = 0; r < channel.size(); ++r) {
    const absl::Span<const uint8_t> part = channel.Part(r);
    if (std::string(part.begin(), part.end()) != PartOf(r, round)) {
      return absl::StrCat("round ", round, ": rank ", r, "'s part differs");
    }
  }
  return "";
}

TEST_CASE("negotiation parts from 2 to 9 ranks reach every rank, round after round") {
  for (int size : {2, 3, 4, 9}) {
    auto groups = MakeGroups(size, 1024);
    const auto results = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
      NegotiationChannel channel(*groups[rank]);
      for (int round = 0; round < 5; ++round) {  // both sets, twice
        const std::string mine = PartOf(rank, round);
        std::memcpy(channel.NextPart(), mine.data(), mine.size());
        channel.Publish(mine.size());
        if (std::string error = CollectAndCheck(channel, round); !error.empty()) return error;
      }
      return "";
    });
    for (const std::string& r : results) CHECK(r == "");
  }
}

// Every rank's channel over `groups`.
std::vector<std::unique_ptr<NegotiationChannel>> ChannelsOf(
    const std::vector<std::unique_ptr<internal::shm::ShmGroup>>& groups) {
  std::vector<std::unique_ptr<NegotiationChannel>> channels;
  for (const auto& g : groups) channels.push_back(std::make_unique<NegotiationChannel>(*g));
  return channels;
}

// The peers a waiting rank heard of, in order, and when it heard `awaited`.
struct Hearing {
  explicit Hearing(int awaited) : awaited(awaited) {}
  void Heard(int rank) {
    heard.push_back(rank);
    if (rank == awaited) heard_awaited.Notify();
  }
  const int awaited;
  std::vector<int> heard;
  absl::Notification heard_awaited;
};

TEST_CASE("a negotiation round hears each peer soon after it arrives, and ends with the last") {
  // Only the last publish of a round rings; a sleeping collector looks
  // again every quarter of a second for the stall check's sake.
  auto groups = MakeGroups(3, 1024);
  auto channels = ChannelsOf(groups);
  for (auto& c : channels) c->NextPart()[0] = 'x';
  Hearing hearing(1);
  absl::Status collected;
  channels[0]->Publish(1);
  std::thread waiter(
      [&] { collected = channels[0]->Collect(Deadline(), [&](int r) { hearing.Heard(r); }); });
  channels[1]->Publish(1);
  // Rank 2 publishes only once rank 1's part was heard: the round is still open.
  REQUIRE(hearing.heard_awaited.WaitForNotificationWithTimeout(absl::Seconds(60)));
  channels[2]->Publish(1);
  waiter.join();
  CHECK(collected.ok());
  CHECK(hearing.heard == std::vector<int>{1, 2});
}

// Rank 0's result of round k where it decides: every third round says
// "decide from the parts"; the others vary in size up to a full result.
std::optional<std::string> ResultOf(int round) {
  if (round % 3 == 2) return std::nullopt;
  constexpr size_t kSizes[] = {0, 7, 5000, NegotiationChannel::kResultBytes};
  return std::string(kSizes[round % 4], static_cast<char>('A' + round % 26));
}

TEST_CASE("where rank 0 decides, the others take its result, or read the parts when it says so") {
  for (int size : {2, 3, 9}) {
    auto groups = MakeGroups(size, 1024, {}, /*rank_zero_decides_from=*/2);
    const auto results = OnEveryRank<std::string>(size, [&](int rank) -> std::string {
      NegotiationChannel channel(*groups[rank]);
      if (!channel.rank_zero_decides()) return "rank 0 does not decide";
      for (int round = 0; round < 8; ++round) {  // both sets, the result area many times
        const std::string mine = PartOf(rank, round);
        std::memcpy(channel.NextPart(), mine.data(), mine.size());
        channel.Publish(mine.size());
        const std::optional<std::string> expected = ResultOf(round);
        if (rank == 0) {
          if (std::string error = CollectAndCheck(channel, round); !error.empty()) return error;
          if (expected.has_value()) {
            std::memcpy(channel.ResultBuffer(), expected->data(), expected->size());
            channel.PublishResult(expected->size());
          } else {
            channel.PublishResult(std::nullopt);
          }
          continue;
        }
        absl::StatusOr<std::optional<absl::Span<const uint8_t>>> result =
            channel.AwaitResult(Deadline(), [](int) {});
        if (!result.ok()) return result.status().ToString();
        if (result->has_value() != expected.has_value()) {
          return absl::StrCat("round ", round, ": rank 0's word was not the one it gave");
        }
        if (!expected.has_value()) {
          if (std::string error = CollectAndCheck(channel, round); !error.empty()) return error;
        } else if (std::string((*result)->begin(), (*result)->end()) != *expected) {
          return absl::StrCat("round ", round, ": the result differs");
        }
      }
      return "";
    });
    for (const std::string& r : results) CHECK(r == "");
  }
}

TEST_CASE("a rank waiting for rank 0's result hears the peers that published meanwhile") {
  // Decided at once, a round reads one word; a long wait looks at who has
  // published every quarter of a second, for the stall check.
  auto groups = MakeGroups(3, 1024, {}, /*rank_zero_decides_from=*/2);
  auto channels = ChannelsOf(groups);
  Hearing hearing(2);
  absl::StatusOr<std::optional<absl::Span<const uint8_t>>> result;
  channels[1]->Publish(0);
  std::thread waiter(
      [&] { result = channels[1]->AwaitResult(Deadline(), [&](int r) { hearing.Heard(r); }); });
  channels[2]->Publish(0);
  REQUIRE(hearing.heard_awaited.WaitForNotificationWithTimeout(absl::Seconds(60)));
  // Rank 0 has not published: the round is open until it has, and decided.
  channels[0]->Publish(0);
  REQUIRE(channels[0]->Collect(Deadline(), [](int) {}).ok());
  channels[0]->ResultBuffer()[0] = 'r';
  channels[0]->PublishResult(1);
  waiter.join();
  REQUIRE(result.ok());
  REQUIRE(result->has_value());
  CHECK(std::string((*result)->begin(), (*result)->end()) == "r");
  CHECK(hearing.heard.front() == 2);
}

TEST_CASE("an abort wakes a rank waiting for a result rank 0 never gives") {
  auto groups = MakeGroups(2, 1024, {}, /*rank_zero_decides_from=*/2);
  NegotiationChannel channel(*groups[1]);
  channel.Publish(0);
  absl::StatusOr<std::optional<absl::Span<const uint8_t>>> result;
  std::thread waiter([&] { result = channel.AwaitResult(Deadline(), [](int) {}); });
  groups[0]->Abort();
  waiter.join();
  CHECK(result.status().code() == absl::StatusCode::kAborted);
}

TEST_CASE("rank 0 decides only from the ranks the group's creator set, on every rank") {
  auto few = MakeGroups(3, 1024, {}, /*rank_zero_decides_from=*/4);
  for (auto& g : few) CHECK_FALSE(NegotiationChannel(*g).rank_zero_decides());
  auto never = MakeGroups(3, 1024, {}, /*rank_zero_decides_from=*/0);
  for (auto& g : never) CHECK_FALSE(NegotiationChannel(*g).rank_zero_decides());
  auto enough = MakeGroups(4, 1024, {}, /*rank_zero_decides_from=*/4);
  for (auto& g : enough) CHECK(NegotiationChannel(*g).rank_zero_decides());
}

TEST_CASE("an abort wakes a rank collecting a round its peer never publishes") {
  auto groups = MakeGroups(2, 1024);
  NegotiationChannel channel(*groups[0]);
  channel.Publish(0);
  absl::Status collected;
  std::thread waiter([&] { collected = channel.Collect(Deadline(), [](int) {}); });
  groups[1]->Abort();  // the generation was superseded
  waiter.join();
  CHECK(collected.code() == absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace horovodd
