// src/common's error tiers: the status macros (errors a caller handles) and
// HVDD_CHECK (invariants; a failure aborts with where and what).
#include <csignal>
#include <string>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "child_stderr.h"
#include "common/check.h"
#include "common/status_macros.h"

namespace horovodd {
namespace {

using hvdd_test::RunInChild;

absl::StatusOr<int> Parse(bool ok, int value) {
  if (!ok) return absl::InvalidArgumentError("not a number");
  return value;
}

absl::Status Steps(bool first_ok, bool second_ok, int* reached) {
  *reached = 0;
  HVDD_RETURN_IF_ERROR(first_ok ? absl::OkStatus() : absl::NotFoundError("first"));
  *reached = 1;
  HVDD_RETURN_IF_ERROR(second_ok ? absl::OkStatus() : absl::UnavailableError("second"));
  *reached = 2;
  return absl::OkStatus();
}

absl::StatusOr<int> Sum(bool a_ok, bool b_ok) {
  HVDD_ASSIGN_OR_RETURN(int a, Parse(a_ok, 2));
  HVDD_ASSIGN_OR_RETURN(const int b, Parse(b_ok, 3), _.WithPrefix("second operand"));
  return a + b;
}

absl::Status Prefixed(bool ok) {
  HVDD_RETURN_IF_ERROR_WITH(ok ? absl::OkStatus() : absl::DeadlineExceededError("slow"),
                            _.WithPrefix("connecting"));
  return absl::OkStatus();
}

TEST_CASE("HVDD_RETURN_IF_ERROR returns the first failure and runs nothing after it") {
  int reached = -1;
  CHECK(Steps(true, true, &reached).ok());
  CHECK(reached == 2);

  absl::Status first = Steps(false, true, &reached);
  CHECK(first.code() == absl::StatusCode::kNotFound);
  CHECK(first.message() == "first");
  CHECK(reached == 0);

  absl::Status second = Steps(true, false, &reached);
  CHECK(second.code() == absl::StatusCode::kUnavailable);
  CHECK(reached == 1);
}

TEST_CASE("HVDD_ASSIGN_OR_RETURN assigns the value or returns the status, with context if asked") {
  absl::StatusOr<int> both = Sum(true, true);
  REQUIRE(both.ok());
  CHECK(*both == 5);

  absl::StatusOr<int> first = Sum(false, true);
  CHECK(first.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(first.status().message() == "not a number");

  absl::StatusOr<int> second = Sum(true, false);
  CHECK(second.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(second.status().message() == "second operand: not a number");

  CHECK(Prefixed(true).ok());
  CHECK(Prefixed(false).code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(Prefixed(false).message() == "connecting: slow");
}

TEST_CASE("HVDD_CHECK that holds evaluates nothing of its message") {
  int streamed = 0;
  auto count = [&streamed] { return ++streamed; };
  HVDD_CHECK(1 + 1 == 2) << count();
  HVDD_CHECK_EQ(4, 2 * 2) << count();
  HVDD_CHECK_LT(1, 2);
  CHECK(streamed == 0);
}

TEST_CASE("A failed HVDD_CHECK aborts, naming the file, line, condition and message") {
  auto [signal, err] = RunInChild([] {
    const int rank = 5, size = 4;
    HVDD_CHECK(rank < size) << "rank " << rank << " of " << size;
  });
  CHECK(signal == SIGABRT);
  CHECK_THAT(err, Catch::Contains("test_common.cc:"));
  CHECK_THAT(err, Catch::Contains("check failed: rank < size rank 5 of 4"));

  auto [eq_signal, eq_err] = RunInChild([] { HVDD_CHECK_EQ(2 + 2, 5) << "arithmetic"; });
  CHECK(eq_signal == SIGABRT);
  CHECK_THAT(eq_err, Catch::Contains("check failed: (2 + 2)==(5) 4 vs 5: arithmetic"));
}

}  // namespace
}  // namespace horovodd
