// The per-generation key-value namespace behind Gloo's rendezvous store.
#include <catch2/catch.hpp>

#include "daemon/kv_namespace/kv_namespace.h"

using horovodd::daemon::KvLimits;
using horovodd::daemon::KvNamespace;

namespace {
struct Answer {
  bool called = false;
  absl::StatusOr<std::vector<std::string>> result = absl::UnknownError("unset");
};
KvNamespace::Reply Into(Answer& a) {
  return [&a](absl::StatusOr<std::vector<std::string>> r) {
    a.called = true;
    a.result = std::move(r);
  };
}
const absl::Time kFar = absl::Now() + absl::Hours(1);
}  // namespace

TEST_CASE("a get waits until every key is set") {
  KvNamespace kv;
  Answer a;
  kv.Get(1, {"0", "1"}, kFar, Into(a));
  CHECK_FALSE(a.called);
  REQUIRE(kv.Set(1, "0", "zero").ok());
  CHECK_FALSE(a.called);
  REQUIRE(kv.Set(1, "1", "one").ok());
  REQUIRE(a.called);
  REQUIRE(a.result.ok());
  CHECK(*a.result == std::vector<std::string>{"zero", "one"});
}

TEST_CASE("generations do not see each other's keys") {
  KvNamespace kv;
  REQUIRE(kv.Set(1, "k", "old").ok());
  Answer a;
  kv.Get(2, {"k"}, kFar, Into(a));
  CHECK_FALSE(a.called);
  REQUIRE(kv.Set(2, "k", "new").ok());
  REQUIRE(a.called);
  CHECK((*a.result)[0] == "new");
}

TEST_CASE("a superseded generation's waiters are aborted and its writes refused") {
  KvNamespace kv;
  Answer a;
  kv.Get(1, {"never"}, kFar, Into(a));
  kv.AdvanceTo(2);
  REQUIRE(a.called);
  CHECK(a.result.status().code() == absl::StatusCode::kAborted);
  CHECK(std::string(a.result.status().message()).find("superseded") != std::string::npos);
  absl::Status st = kv.Set(1, "k", "v");
  CHECK(st.code() == absl::StatusCode::kAborted);
  Answer b;
  kv.Get(1, {"k"}, kFar, Into(b));
  CHECK(b.result.status().code() == absl::StatusCode::kAborted);
}

TEST_CASE("a waiter past its deadline gets DEADLINE_EXCEEDED naming the key") {
  KvNamespace kv;
  Answer a;
  const absl::Time soon = absl::Now() + absl::Seconds(1);
  kv.Get(3, {"rank7"}, soon, Into(a));
  CHECK(kv.NextDeadline() == soon);
  kv.ExpireWaiters(soon - absl::Milliseconds(1));
  CHECK_FALSE(a.called);
  CHECK(kv.ExpireWaiters(soon) == absl::InfiniteFuture());
  REQUIRE(a.called);
  CHECK(a.result.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(a.result.status().message()).find("rank7") != std::string::npos);
}

TEST_CASE("limits on values and key counts give RESOURCE_EXHAUSTED") {
  KvLimits limits;
  limits.max_value_bytes = 8;
  limits.max_keys = 2;
  KvNamespace kv(limits);
  CHECK(kv.Set(1, "big", std::string(9, 'x')).code() == absl::StatusCode::kResourceExhausted);
  CHECK(kv.Set(1, "a", "1").ok());
  CHECK(kv.Set(1, "b", "2").ok());
  CHECK(kv.Set(1, "a", "3").ok());  // overwriting does not add a key
  CHECK(kv.Set(1, "c", "4").code() == absl::StatusCode::kResourceExhausted);
  CHECK(kv.Set(1, "", "4").code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("destroying the namespace aborts its waiters") {
  Answer a;
  {
    KvNamespace kv;
    kv.Get(1, {"x"}, kFar, Into(a));
  }
  REQUIRE(a.called);
  CHECK(a.result.status().code() == absl::StatusCode::kAborted);
}

TEST_CASE("many waiters on overlapping keys are each answered when their last key is set") {
  KvNamespace kv;
  Answer ab, ba, c, bc_expiring, empty;
  const absl::Time now = absl::Now();
  kv.Get(1, {"a", "b"}, kFar, Into(ab));
  kv.Get(1, {"b", "a"}, kFar, Into(ba));
  kv.Get(1, {"c"}, kFar, Into(c));
  kv.Get(1, {"b", "c"}, now + absl::Seconds(1), Into(bc_expiring));
  kv.Get(7, {}, kFar, Into(empty));  // nothing to wait for, even in an unknown generation
  CHECK(empty.called);
  CHECK(kv.NextDeadline() == now + absl::Seconds(1));

  REQUIRE(kv.Set(1, "b", "B").ok());
  CHECK_FALSE(ab.called);
  CHECK_FALSE(ba.called);
  CHECK_FALSE(bc_expiring.called);
  // Past its deadline, only the expiring read goes, naming the key it lacked.
  CHECK(kv.ExpireWaiters(now + absl::Seconds(2)) == kFar);
  REQUIRE(bc_expiring.called);
  CHECK(bc_expiring.result.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(bc_expiring.result.status().message()).find("'c'") != std::string::npos);
  CHECK_FALSE(ab.called);

  REQUIRE(kv.Set(1, "a", "A").ok());
  REQUIRE(ab.called);
  REQUIRE(ba.called);
  CHECK(*ab.result == std::vector<std::string>{"A", "B"});
  CHECK(*ba.result == std::vector<std::string>{"B", "A"});
  CHECK_FALSE(c.called);
  REQUIRE(kv.Set(1, "c", "C").ok());
  REQUIRE(c.called);
  CHECK(*c.result == std::vector<std::string>{"C"});
}
