// The worker's environment variables, read one way by every file of the
// runtime (runtime_options.cc parses the options; the rest read a flag or an
// address).
#pragma once

#include <string>

namespace horovodd::internal {

// The variable's value, or "" when it is unset.
std::string OptionalEnv(const char* name);

}  // namespace horovodd::internal
