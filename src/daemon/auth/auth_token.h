// The secrets horovodd checks (admin, viewer and per-job worker tokens):
// making them, keeping them in private files, and comparing them without
// leaking through timing how much of a guess was right.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace horovodd::daemon {

// 256 random bits from the kernel (getrandom), as 64 lowercase hex digits.
// INTERNAL when the kernel has no randomness to give.
absl::StatusOr<std::string> GenerateToken();

// The token in `path`, surrounding whitespace removed. `setting` names where
// the path came from ("auth.admin_token_file") for the messages. NOT_FOUND
// when it cannot be read; FAILED_PRECONDITION when group or others may read
// or write it (the message names the file and its mode); INVALID_ARGUMENT
// when it is empty.
absl::StatusOr<std::string> ReadPrivateTokenFile(const std::string& path,
                                                 absl::string_view setting);

// The token in `path` if the file exists (checked as above), else a new one
// written there with mode 0600 (atomically: a reader never sees half of it).
absl::StatusOr<std::string> LoadOrCreateTokenFile(const std::string& path);

// Whether `presented` equals `expected`, in time that depends on neither
// (both are hashed, then the digests compared with CRYPTO_memcmp). An empty
// `expected` matches nothing.
bool TokensMatch(absl::string_view presented, absl::string_view expected);

}  // namespace horovodd::daemon
