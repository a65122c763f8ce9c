#include "daemon/auth/auth_token.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace horovodd::daemon {
namespace {

constexpr size_t kTokenBytes = 32;  // 256 bits

std::string ModeText(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

}  // namespace

absl::StatusOr<std::string> GenerateToken() {
  unsigned char bytes[kTokenBytes];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("cannot get random bytes for a token: ", std::strerror(errno)));
    }
    filled += static_cast<size_t>(n);
  }
  std::string token = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
  OPENSSL_cleanse(bytes, sizeof(bytes));
  return token;
}

absl::StatusOr<std::string> ReadPrivateTokenFile(const std::string& path,
                                                 absl::string_view setting) {
  // Opened first, then checked through the descriptor: the file checked is the file read.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat(setting, ": cannot read token file ", path, ": ", std::strerror(errno)));
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(setting, ": token file ", path, " is not a regular file"));
  }
  if ((info.st_mode & 077) != 0) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        setting, ": token file ", path, " is readable or writable by group or others (mode ",
        ModeText(info.st_mode), "); make it private with: chmod 600 ", path));
  }
  std::string content;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    content.append(buffer, static_cast<size_t>(n));
    if (content.size() > 64 * 1024) break;  // a token, not a data file
  }
  OPENSSL_cleanse(buffer, sizeof(buffer));
  close(fd);
  std::string token(absl::StripAsciiWhitespace(content));
  OPENSSL_cleanse(content.data(), content.size());
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(setting, ": token file ", path, " is empty"));
  }
  return token;
}

absl::StatusOr<std::string> LoadOrCreateTokenFile(const std::string& path) {
  if (access(path.c_str(), F_OK) == 0) return ReadPrivateTokenFile(path, "admin token");
  HVDD_ASSIGN_OR_RETURN(std::string token, GenerateToken());
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create admin token file ", temporary, ": ", std::strerror(errno)));
  }
  const std::string line = token + "\n";
  const bool written =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  close(fd);
  if (!written || rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(temporary.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write admin token file ", path, ": ", why));
  }
  return token;
}

bool TokensMatch(absl::string_view presented, absl::string_view expected) {
  if (expected.empty()) return false;
  unsigned char a[SHA256_DIGEST_LENGTH];
  unsigned char b[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(presented.data()), presented.size(), a);
  SHA256(reinterpret_cast<const unsigned char*>(expected.data()), expected.size(), b);
  return CRYPTO_memcmp(a, b, sizeof(a)) == 0;
}

}  // namespace horovodd::daemon
