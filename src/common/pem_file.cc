#include "common/pem_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace horovodd {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, absl::string_view setting) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(setting, ": cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view setting) {
  absl::StatusOr<std::string> text = ReadWholeFile(path, setting);
  if (text.ok() && text->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(setting, ": ", path, " is empty"));
  }
  return text;
}

}  // namespace horovodd
