#include "common/check.h"

#include <cstdlib>
#include <string>

#include "common/log.h"

namespace horovodd::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  message_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  // Past the level filter: a broken invariant is always reported. Sinks
  // write each line through, so it is out before the abort.
  log_internal::Write(LogLevel::kError, message_.str());
  std::abort();
}

}  // namespace horovodd::internal
