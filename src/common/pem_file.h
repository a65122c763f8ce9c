// Reading a file named by a setting: a PEM file (a TLS certificate, key or
// CA: the daemon's `tls` section, the workers' and the CLIs' HOROVODD_TLS_*
// variables and the shim's relay all read theirs here) or a token file, so a
// bad path reads the same everywhere.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace horovodd {

// The whole of the file at `path`. NOT_FOUND naming `setting`, the path and
// the reason when it cannot be read.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, absl::string_view setting);

// ReadWholeFile, and INVALID_ARGUMENT when the file is empty.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view setting);

}  // namespace horovodd
