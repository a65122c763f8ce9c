// Invariants: conditions that hold unless horovodd itself has a bug. A failed
// check prints where and what, then aborts (a core dump beats carrying on
// with a broken invariant); it is never a way to report bad input, which gets
// an absl::Status naming what was wrong. The tier Gloo's GLOO_ENFORCE is, but
// without an exception to catch.
//
//   HVDD_CHECK(rank < size) << "rank " << rank << " of " << size;
//   HVDD_CHECK_EQ(buffer.size(), expected);
#pragma once

#include <sstream>

namespace horovodd::internal {

// Collects the message of a failed check; its destructor prints it and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  std::ostream& stream() { return message_; }

 private:
  std::ostringstream message_;
};

// Lets `HVDD_CHECK(x) << ...` be one expression whose streaming happens only
// when the check fails.
struct CheckVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace horovodd::internal

#define HVDD_CHECK(condition)                          \
  (condition) ? (void)0                                \
              : ::horovodd::internal::CheckVoidify() & \
                    ::horovodd::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define HVDD_CHECK_OP(a, op, b) HVDD_CHECK((a)op(b)) << (a) << " vs " << (b) << ": "
#define HVDD_CHECK_EQ(a, b) HVDD_CHECK_OP(a, ==, b)
#define HVDD_CHECK_NE(a, b) HVDD_CHECK_OP(a, !=, b)
#define HVDD_CHECK_LT(a, b) HVDD_CHECK_OP(a, <, b)
#define HVDD_CHECK_LE(a, b) HVDD_CHECK_OP(a, <=, b)
#define HVDD_CHECK_GT(a, b) HVDD_CHECK_OP(a, >, b)
#define HVDD_CHECK_GE(a, b) HVDD_CHECK_OP(a, >=, b)
