// The `limits:` section of horovodd's config: every key is read, documented
// in the shipped config/horovodd.yaml with its default, and bad or
// contradictory values are refused naming the key.
#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/config/daemon_config.h"

using horovodd::daemon::DaemonLimits;
using horovodd::daemon::LoadDaemonConfig;
using horovodd::daemon::ParseDaemonConfig;

namespace {

struct LimitField {
  const char* key;
  int DaemonLimits::*field;
};

const LimitField kFields[] = {
    {"max_jobs", &DaemonLimits::max_jobs},
    {"max_workers_per_job", &DaemonLimits::max_workers_per_job},
    {"max_message_bytes", &DaemonLimits::max_message_bytes},
    {"max_job_spec_bytes", &DaemonLimits::max_job_spec_bytes},
    {"max_kv_key_bytes", &DaemonLimits::max_kv_key_bytes},
    {"max_kv_value_bytes", &DaemonLimits::max_kv_value_bytes},
    {"max_kv_keys_per_job", &DaemonLimits::max_kv_keys_per_job},
    {"max_kv_bytes_per_job", &DaemonLimits::max_kv_bytes_per_job},
    {"max_kv_waiters_per_job", &DaemonLimits::max_kv_waiters_per_job},
    {"max_watch_streams_per_client", &DaemonLimits::max_watch_streams_per_client},
    {"max_attach_streams_per_client", &DaemonLimits::max_attach_streams_per_client},
};

}  // namespace

TEST_CASE("ParseDaemonConfig reads text as LoadDaemonConfig reads a file") {
  auto parsed = ParseDaemonConfig("log_level: debug\n", "inline.yaml");
  REQUIRE(parsed.ok());
  CHECK(parsed->log_level == "debug");
  auto bad = ParseDaemonConfig("listen: [1, 2\n", "inline.yaml");
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::StartsWith("inline.yaml:"));
  CHECK(ParseDaemonConfig("", "empty.yaml").ok());
  // A section whose keys are all commented out keeps the defaults.
  auto empty_section = ParseDaemonConfig("limits:\n  # max_jobs: 5\n", "inline.yaml");
  REQUIRE(empty_section.ok());
  CHECK(empty_section->limits.max_jobs == DaemonLimits().max_jobs);
}

TEST_CASE("every limits key is read into its field") {
  for (const LimitField& f : kFields) {
    INFO("key: " << f.key);
    // The message size must carry the largest key-value write: with the
    // smallest one allowed, 4098 bytes do.
    const bool message_size = std::string(f.key) == "max_message_bytes";
    const int value = message_size ? 4098 : 7;
    const std::string text =
        absl::StrCat("limits:\n  ", f.key, ": ", value, "\n",
                     message_size ? "  max_kv_value_bytes: 1\n  max_kv_key_bytes: 1\n"
                                    "  max_job_spec_bytes: 1\n"
                                  : "");
    auto parsed = ParseDaemonConfig(text, "limits.yaml");
    INFO(parsed.status().message());
    REQUIRE(parsed.ok());
    CHECK(parsed->limits.*(f.field) == value);
  }
}

TEST_CASE("the shipped config states every limit's default") {
  auto loaded = LoadDaemonConfig(std::string(HVDD_SOURCE_DIR) + "/config/horovodd.yaml");
  INFO(loaded.status().message());
  REQUIRE(loaded.ok());
  const DaemonLimits defaults;
  for (const LimitField& f : kFields) {
    INFO("key: " << f.key);
    CHECK(loaded->limits.*(f.field) == defaults.*(f.field));
  }
  // And names each of them (a key left out of the file would still load).
  for (const LimitField& f : kFields) {
    auto only = ParseDaemonConfig(absl::StrCat("limits:\n  ", f.key, ": 0\n"), "x.yaml");
    CHECK_THAT(std::string(only.status().message()),
               Catch::Contains(absl::StrCat("limits.", f.key, ": '0' is not a whole number >= 1")));
  }
}

TEST_CASE("bad limit values and unknown limit keys are refused naming them") {
  auto parsed = ParseDaemonConfig("limits:\n  max_kv_value_bytes: lots\n", "f.yaml");
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(parsed.status().message()),
             Catch::Contains("f.yaml:2: limits.max_kv_value_bytes: 'lots' is not a whole number"));
  parsed = ParseDaemonConfig("limits:\n  max_kv_value: 5\n", "f.yaml");
  CHECK_THAT(std::string(parsed.status().message()),
             Catch::Contains("unknown key 'limits.max_kv_value'"));
  CHECK_THAT(std::string(parsed.status().message()), Catch::Contains("max_kv_value_bytes"));
  parsed = ParseDaemonConfig("limits:\n  max_jobs: 99999999999999\n", "f.yaml");
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a message size that cannot carry the largest key-value write is refused") {
  auto parsed = ParseDaemonConfig("limits:\n  max_message_bytes: 1048576\n", "f.yaml");
  CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(parsed.status().message()),
             Catch::Contains("limits.max_message_bytes (1048576) must be at least "
                             "limits.max_kv_value_bytes"));
  parsed = ParseDaemonConfig("limits:\n  max_message_bytes: 1048576\n  max_kv_value_bytes: 65536\n",
                             "f.yaml");
  CHECK(parsed.ok());
  parsed = ParseDaemonConfig(
      "limits:\n  max_message_bytes: 1048576\n  max_kv_value_bytes: 65536\n"
      "  max_job_spec_bytes: 2097152\n",
      "f.yaml");
  CHECK_THAT(std::string(parsed.status().message()),
             Catch::Contains("must be at least limits.max_job_spec_bytes"));
}
