// Rank assignment and generation planning: the rules a reset must follow.
#include <catch2/catch.hpp>

#include "daemon/membership/membership.h"

using horovodd::daemon::AssignRanks;
using horovodd::daemon::Member;
using horovodd::daemon::PlanGeneration;
using horovodd::daemon::PlanInput;
using horovodd::daemon::RemovedRanks;

namespace {
std::vector<int64_t> Ids(const std::vector<Member>& members) {
  std::vector<int64_t> out;
  for (const auto& m : members) out.push_back(m.worker_id);
  return out;
}
}  // namespace

std::vector<std::pair<std::string, int>> Usable(const std::map<std::string, int>& hosts) {
  return {hosts.begin(), hosts.end()};
}

TEST_CASE("survivors keep their order and rank 0 stays on a survivor") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "b"}, {3, "b"}, {4, "c"}};
  in.lost = {2};
  in.discovered = {{"a", 1}, {"b", 2}, {"c", 1}};
  in.usable = {{"a", 1}, {"b", 2}, {"c", 1}};
  auto plan = PlanGeneration(in);
  CHECK(Ids(plan.survivors) == std::vector<int64_t>{1, 3, 4});
  CHECK(plan.new_hosts == std::vector<std::string>{"b"});  // the free slot, appended
  CHECK(plan.removed.empty());
}

TEST_CASE("a failing worker's host is blacklisted: its other workers leave") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}};
  in.lost = {2};
  in.discovered = {{"a", 2}, {"b", 2}};
  in.blacklisted = {"a"};
  in.usable = {{"b", 2}};  // a is in cooldown after the failure
  auto plan = PlanGeneration(in);
  CHECK(Ids(plan.survivors) == std::vector<int64_t>{3, 4});
  CHECK(plan.removed == std::vector<int64_t>{1});
  CHECK(plan.left_blacklisted == std::vector<int64_t>{1});
  CHECK_FALSE(plan.kept_on_blacklisted);
  CHECK(plan.new_hosts.empty());
}

TEST_CASE("survivors on blacklisted hosts stay when nobody else would survive") {
  // A single-host job: Horovod would fail ("No hosts from previous set
  // remaining"); here the survivors carry the training state on.
  PlanInput in;
  in.current = {{1, "a"}, {2, "a"}, {3, "a"}};
  in.lost = {1};
  in.discovered = {{"a", 3}, {"b", 2}};
  in.blacklisted = {"a"};
  in.usable = {{"b", 2}};
  auto plan = PlanGeneration(in);
  CHECK(Ids(plan.survivors) == std::vector<int64_t>{2, 3});
  CHECK(plan.removed.empty());
  CHECK(plan.kept_on_blacklisted);
  CHECK(plan.new_hosts == std::vector<std::string>{"b", "b"});
}

TEST_CASE("new workers fill hosts in assignment order, slot by slot") {
  PlanInput in;
  in.discovered = {{"z", 2}, {"a", 1}, {"m", 2}};
  in.usable = {{"z", 2}, {"a", 1}, {"m", 2}};  // as the script printed them
  auto plan = PlanGeneration(in);
  CHECK(plan.new_hosts == std::vector<std::string>{"z", "z", "a", "m", "m"});
  in.max_size = 3;
  CHECK(PlanGeneration(in).new_hosts == std::vector<std::string>{"z", "z", "a"});
}

TEST_CASE("when rank 0 dies the lowest survivor becomes rank 0") {
  PlanInput in;
  in.current = {{7, "a"}, {8, "a"}, {9, "a"}};
  in.lost = {7};
  in.discovered = {{"a", 3}};
  auto plan = PlanGeneration(in);
  REQUIRE(plan.survivors.size() == 2);
  CHECK(plan.survivors[0].worker_id == 8);
}

TEST_CASE("new workers are appended after the survivors, up to max size") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "a"}};
  in.discovered = {{"a", 2}, {"b", 4}};
  in.usable = Usable(in.discovered);
  in.max_size = 4;
  auto plan = PlanGeneration(in);
  CHECK(Ids(plan.survivors) == std::vector<int64_t>{1, 2});
  CHECK(plan.new_hosts == std::vector<std::string>{"b", "b"});
  CHECK(plan.size() == 4);
  CHECK_FALSE(plan.unchanged(2));
}

TEST_CASE("a host that loses slots sheds its highest ranks") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "b"}, {3, "a"}, {4, "b"}};
  in.discovered = {{"a", 1}, {"b", 2}};
  in.usable = Usable(in.discovered);
  auto plan = PlanGeneration(in);
  CHECK(Ids(plan.survivors) == std::vector<int64_t>{1, 2, 4});
  CHECK(plan.removed == std::vector<int64_t>{3});
}

TEST_CASE("a host that disappears removes all its workers") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "b"}};
  in.discovered = {{"a", 1}};
  in.usable = Usable(in.discovered);
  auto plan = PlanGeneration(in);
  CHECK(Ids(plan.survivors) == std::vector<int64_t>{1});
  CHECK(plan.removed == std::vector<int64_t>{2});
}

TEST_CASE("nothing changes when the hosts still fit the members") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "a"}};
  in.discovered = {{"a", 2}};
  in.usable = Usable(in.discovered);
  CHECK(PlanGeneration(in).unchanged(2));
}

TEST_CASE("max size caps survivors too") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "a"}, {3, "a"}};
  in.discovered = {{"a", 3}};
  in.usable = Usable(in.discovered);
  in.max_size = 2;
  auto plan = PlanGeneration(in);
  CHECK(Ids(plan.survivors) == std::vector<int64_t>{1, 2});
  CHECK(plan.removed == std::vector<int64_t>{3});
}

TEST_CASE("ranks: local and cross ranks follow Horovod's layout") {
  auto ranks = AssignRanks({"a", "a", "b", "b", "c"});
  REQUIRE(ranks.size() == 5);
  CHECK(ranks[0].local_rank == 0);
  CHECK(ranks[1].local_rank == 1);
  CHECK(ranks[2].local_rank == 0);
  CHECK(ranks[4].local_rank == 0);
  CHECK(ranks[0].local_size == 2);
  CHECK(ranks[4].local_size == 1);
  CHECK(ranks[0].cross_rank == 0);
  CHECK(ranks[2].cross_rank == 1);
  CHECK(ranks[4].cross_rank == 2);
  CHECK(ranks[0].cross_size == 3);  // a, b, c all have a local rank 0
  CHECK(ranks[1].cross_size == 2);  // only a and b have a local rank 1
  CHECK(ranks[3].cross_rank == 1);
  for (int r = 0; r < 5; ++r) {
    CHECK(ranks[r].rank == r);
    CHECK(ranks[r].size == 5);
  }
}

// Whether workers may shrink their NCCL communicator (the GPU check runs
// the shrink itself).
TEST_CASE("Removing workers excludes their previous ranks", "[membership][shrink]") {
  // Worker ids by rank: 10 11 12 13; workers 11 and 13 left.
  std::optional<std::vector<int>> excluded = RemovedRanks({10, 11, 12, 13}, {10, 12});
  REQUIRE(excluded.has_value());
  CHECK(*excluded == std::vector<int>{1, 3});

  excluded = RemovedRanks({10, 11, 12, 13}, {11, 12, 13});
  REQUIRE(excluded.has_value());
  CHECK(*excluded == std::vector<int>{0});
}

TEST_CASE("The same members in the same order exclude nobody", "[membership][shrink]") {
  std::optional<std::vector<int>> excluded = RemovedRanks({4, 5}, {4, 5});
  REQUIRE(excluded.has_value());
  CHECK(excluded->empty());
}

TEST_CASE("An added or reordered worker needs a new communicator", "[membership][shrink]") {
  CHECK_FALSE(RemovedRanks({10, 11, 12}, {10, 11, 12, 13}).has_value());  // grew
  CHECK_FALSE(RemovedRanks({10, 11, 12}, {10, 14}).has_value());          // replaced
  CHECK_FALSE(RemovedRanks({10, 11, 12}, {12, 10}).has_value());          // reordered
}

TEST_CASE("An unknown membership never shrinks", "[membership][shrink]") {
  // An older daemon sends no worker ids: both lists may come back empty.
  CHECK_FALSE(RemovedRanks({}, {}).has_value());
  CHECK_FALSE(RemovedRanks({10, 11}, {}).has_value());
  CHECK_FALSE(RemovedRanks({}, {10}).has_value());
}

// ---- hot spares (PlanInput::hot_spares)

TEST_CASE("hot spares: the first plan sets slots aside, off the job's hosts first", "[spares]") {
  PlanInput in;
  in.usable = {{"a", 2}, {"b", 2}, {"c", 1}};
  in.discovered = {{"a", 2}, {"b", 2}, {"c", 1}};
  in.hot_spares = 1;
  in.keep_size = 2;  // -np 2, no --max-np: the job takes what the spare leaves
  auto plan = PlanGeneration(in);
  CHECK(plan.new_hosts == std::vector<std::string>{"a", "a", "b", "b"});
  CHECK(plan.spare_hosts == std::vector<std::string>{"c"});
  CHECK(plan.spares == 1);
}

TEST_CASE("hot spares: beside --max-np, on the host without a member, else the emptiest",
          "[spares]") {
  PlanInput in;
  in.usable = {{"a", 2}, {"b", 3}, {"c", 1}};
  in.discovered = {{"a", 2}, {"b", 3}, {"c", 1}};
  in.max_size = 3;
  in.hot_spares = 2;
  in.keep_size = 3;
  auto plan = PlanGeneration(in);
  CHECK(plan.new_hosts == std::vector<std::string>{"a", "a", "b"});
  // c has no member; then b (1 member) is emptier than a (2, and full).
  CHECK(plan.spare_hosts == std::vector<std::string>{"c", "b"});
  CHECK(plan.spares == 2);
}

TEST_CASE("hot spares: -np comes first; fewer spares when slots are short, never a refusal",
          "[spares]") {
  PlanInput in;
  in.usable = {{"a", 3}};
  in.discovered = {{"a", 3}};
  in.hot_spares = 4;
  in.keep_size = 2;
  auto plan = PlanGeneration(in);
  CHECK(plan.size() == 2);
  CHECK(plan.spare_hosts == std::vector<std::string>{"a"});
  CHECK(plan.spares == 1);
}

TEST_CASE("hot spares: a lost worker's place goes to a ready spare, appended after the survivors",
          "[spares]") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "b"}, {3, "b"}};
  in.lost = {2};
  in.discovered = {{"a", 1}, {"b", 2}, {"c", 1}, {"d", 1}};
  in.blacklisted = {"b"};
  in.usable = {{"a", 1}, {"c", 1}, {"d", 1}};
  in.spares = {{9, "d"}, {8, "c"}};  // 9 is ready, 8 still starting
  in.hot_spares = 2;
  in.keep_size = 3;
  auto plan = PlanGeneration(in);
  CHECK(Ids(plan.survivors) == std::vector<int64_t>{1});
  CHECK(plan.removed == std::vector<int64_t>{3});  // b is blacklisted
  CHECK(Ids(plan.promoted) == std::vector<int64_t>{9, 8});
  CHECK(plan.size() == 3);
  CHECK(plan.new_hosts.empty());
  CHECK(plan.spare_hosts.empty());  // no slot left for a new spare
  CHECK(plan.spares == 0);
  CHECK_FALSE(plan.unchanged(3));
}

TEST_CASE(
    "hot spares: a spare on a blacklisted or vanished host leaves; a new one starts "
    "elsewhere, the job unchanged",
    "[spares]") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "a"}};
  in.discovered = {{"a", 2}, {"c", 1}};
  in.blacklisted = {"c"};
  in.usable = {{"a", 2}, {"d", 1}};
  in.spares = {{7, "c"}};
  in.hot_spares = 1;
  in.keep_size = 2;
  auto plan = PlanGeneration(in);
  CHECK(plan.unchanged(2));
  CHECK(plan.spares_removed == std::vector<int64_t>{7});
  CHECK(plan.spare_hosts == std::vector<std::string>{"d"});
}

TEST_CASE("hot spares: added slots top the spares up first, then the job grows", "[spares]") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "b"}};
  in.discovered = {{"a", 1}, {"b", 1}, {"c", 1}};
  in.usable = {{"a", 1}, {"b", 1}, {"c", 1}};
  in.hot_spares = 1;
  in.keep_size = 2;
  auto one_more = PlanGeneration(in);
  CHECK(one_more.unchanged(2));
  CHECK(one_more.spare_hosts == std::vector<std::string>{"c"});

  in.spares = {{3, "c"}};
  in.discovered["d"] = 1;
  in.usable.emplace_back("d", 1);
  auto two_more = PlanGeneration(in);
  // The job grows by one: the ready spare takes the place (no cold start), and a new spare
  // starts on the new slot.
  CHECK(Ids(two_more.promoted) == std::vector<int64_t>{3});
  CHECK(two_more.new_hosts.empty());
  CHECK(two_more.spare_hosts == std::vector<std::string>{"d"});
  CHECK(two_more.size() == 3);
}

TEST_CASE("hot spares: none asked, the plan is Horovod's", "[spares]") {
  PlanInput in;
  in.current = {{1, "a"}, {2, "b"}};
  in.lost = {2};
  in.discovered = {{"a", 2}, {"b", 1}};
  in.usable = {{"a", 2}, {"b", 1}};
  in.keep_size = 2;
  auto plan = PlanGeneration(in);
  CHECK(plan.new_hosts == std::vector<std::string>{"a", "b"});
  CHECK(plan.spare_hosts.empty());
  CHECK(plan.spares == 0);
}
