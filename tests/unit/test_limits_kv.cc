// What one job's key-value namespace may hold (limits.max_kv_*) and how many
// streams one client may hold open (ClientStreamLimiter).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "daemon/kv_namespace/kv_namespace.h"
#include "daemon/rpc/client_stream_limiter.h"

using horovodd::daemon::ClientStreamLimiter;
using horovodd::daemon::KvLimits;
using horovodd::daemon::KvNamespace;

namespace {

const absl::Time kFar = absl::Now() + absl::Hours(1);

#define CHECK_REFUSED(status_expr, code_, text)                    \
  do {                                                             \
    const absl::Status st_ = (status_expr);                        \
    CHECK(st_.code() == absl::StatusCode::code_);                  \
    CHECK_THAT(std::string(st_.message()), Catch::Contains(text)); \
  } while (false)

}  // namespace

TEST_CASE("keys over the key size limit are refused naming limits.max_kv_key_bytes") {
  KvLimits limits;
  limits.max_key_bytes = 4;
  KvNamespace kv(limits);
  CHECK(kv.Set(1, "abcd", "v").ok());
  CHECK_REFUSED(kv.Set(1, "abcde", "v"), kResourceExhausted, "(limits.max_kv_key_bytes)");
  absl::Status got = absl::UnknownError("unset");
  kv.Get(1, {"abcde"}, kFar, [&](auto result) { got = result.status(); });
  CHECK_REFUSED(got, kResourceExhausted, "(limits.max_kv_key_bytes)");
}

TEST_CASE("keys per job count every generation held, so writing ahead cannot dodge them") {
  KvLimits limits;
  limits.max_keys = 3;
  KvNamespace kv(limits);
  CHECK(kv.Set(1, "a", "1").ok());
  CHECK(kv.Set(2, "a", "1").ok());
  CHECK(kv.Set(1000000, "a", "1").ok());
  CHECK_REFUSED(kv.Set(1000001, "a", "1"), kResourceExhausted,
                "this job already holds 3 keys, the limit (limits.max_kv_keys_per_job)");
  CHECK(kv.key_count() == 3);
  // A new generation drops the older ones, and with them their keys.
  kv.AdvanceTo(2);
  CHECK(kv.key_count() == 2);
  CHECK(kv.Set(2, "b", "2").ok());
}

TEST_CASE("bytes per job bound keys plus values; overwriting frees the old value") {
  KvLimits limits;
  limits.max_bytes = 20;
  KvNamespace kv(limits);
  CHECK(kv.Set(1, "k", std::string(15, 'x')).ok());  // 16 bytes
  CHECK(kv.byte_count() == 16);
  CHECK_REFUSED(kv.Set(1, "j", std::string(4, 'x')), kResourceExhausted,
                "(limits.max_kv_bytes_per_job)");
  CHECK(kv.Set(1, "k", std::string(19, 'x')).ok());  // replaces: 20 bytes
  CHECK(kv.byte_count() == 20);
  CHECK(kv.Set(1, "k", "").ok());
  CHECK(kv.byte_count() == 1);
  kv.AdvanceTo(5);
  CHECK(kv.byte_count() == 0);
  CHECK(kv.key_count() == 0);
}

TEST_CASE("values over the size limit name limits.max_kv_value_bytes") {
  KvLimits limits;
  limits.max_value_bytes = 3;
  KvNamespace kv(limits);
  CHECK_REFUSED(kv.Set(1, "k", "four"), kResourceExhausted,
                "value of key 'k' is 4 bytes; the limit is 3 bytes (limits.max_kv_value_bytes)");
  CHECK(kv.key_count() == 0);
}

TEST_CASE("waiting reads past the limit are refused; answered ones free their place") {
  KvLimits limits;
  limits.max_waiters = 2;
  limits.max_keys = 10;
  KvNamespace kv(limits);
  int answered = 0;
  auto count = [&](auto result) { answered += result.ok() ? 1 : 0; };
  kv.Get(1, {"x"}, kFar, count);
  kv.Get(1, {"y"}, kFar, count);
  absl::Status third = absl::UnknownError("unset");
  kv.Get(1, {"z"}, kFar, [&](auto result) { third = result.status(); });
  CHECK_REFUSED(third, kResourceExhausted, "(limits.max_kv_waiters_per_job)");
  // A read that can be answered at once never waits, so it is not refused.
  REQUIRE(kv.Set(1, "x", "1").ok());
  CHECK(answered == 1);
  bool got_now = false;
  kv.Get(1, {"x"}, kFar, [&](auto result) { got_now = result.ok(); });
  CHECK(got_now);
  // More keys than a job may hold can never all exist.
  absl::Status many = absl::UnknownError("unset");
  kv.Get(1, std::vector<std::string>(11, "k"), kFar, [&](auto result) { many = result.status(); });
  CHECK_REFUSED(many, kResourceExhausted, "(limits.max_kv_keys_per_job)");
}

TEST_CASE("a client is its peer address without the port") {
  CHECK(ClientStreamLimiter::ClientOf("ipv4:127.0.0.1:5555") == "ipv4:127.0.0.1");
  CHECK(ClientStreamLimiter::ClientOf("ipv6:[::1]:5555") == "ipv6:[::1]");
  CHECK(ClientStreamLimiter::ClientOf("unix:/tmp/sock") == "unix:/tmp/sock");
  CHECK(ClientStreamLimiter::ClientOf("unix:123") == "unix:123");
  CHECK(ClientStreamLimiter::ClientOf("") == "");
}

TEST_CASE("streams per client: the one past the limit is refused until one closes") {
  ClientStreamLimiter limiter("WatchJob", "limits.max_watch_streams_per_client", 2);
  auto a = limiter.Acquire("ipv4:127.0.0.1:1000");
  auto b = limiter.Acquire("ipv4:127.0.0.1:1001");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto c = limiter.Acquire("ipv4:127.0.0.1:1002");
  CHECK_REFUSED(c.status(), kResourceExhausted,
                "client ipv4:127.0.0.1 already holds 2 WatchJob streams open, the limit "
                "(limits.max_watch_streams_per_client)");
  // Another client is counted on its own.
  CHECK(limiter.Acquire("ipv4:127.0.0.2:1000").ok());
  CHECK(limiter.OpenStreams("ipv4:127.0.0.1:9") == 2);
  { auto gone = std::move(*a); }
  CHECK(limiter.OpenStreams("ipv4:127.0.0.1:9") == 1);
  auto d = limiter.Acquire("ipv4:127.0.0.1:1003");
  CHECK(d.ok());
  // A moved-from slot releases nothing twice.
  ClientStreamLimiter::Slot moved = std::move(*d);
  ClientStreamLimiter::Slot other;
  other = std::move(moved);
  CHECK(limiter.OpenStreams("ipv4:127.0.0.1:9") == 2);
}
