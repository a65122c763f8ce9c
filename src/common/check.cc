#include "common/check.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace horovodd::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  message_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  const std::string text = message_.str();
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace horovodd::internal
