// Reading a PEM file (a TLS certificate, key or CA) named by a setting: the
// daemon's `tls` section, the workers' HOROVODD_TLS_* variables and the
// shim's relay all read theirs here, so a bad path reads the same everywhere.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace horovodd {

// The whole of the file at `path`. NOT_FOUND naming `setting`, the path and
// the reason when it cannot be read; INVALID_ARGUMENT when it is empty.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view setting);

}  // namespace horovodd
