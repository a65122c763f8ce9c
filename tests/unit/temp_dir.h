// A fresh directory under the system temp dir for one test case, removed with everything in it
// when the case ends (whether it passed or not).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <catch2/catch.hpp>

namespace hvdd_test {

class TempDir {
 public:
  // `prefix` names the directory (e.g. "hvdd-discovery"), so a leftover says whose it was.
  explicit TempDir(const std::string& prefix = "hvdd-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace hvdd_test
