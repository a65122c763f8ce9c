// Shared helpers of the horovodrun option tests.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cli/horovodrun/run_options.h"

namespace horovodd::cli::test_support {

namespace fs = std::filesystem;
using Kind = ParseOutcome::Kind;

inline ParseOutcome Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "horovodrun");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return ParseRunOptions(static_cast<int>(argv.size()), argv.data());
}

// Parses and requires a runnable job; on failure the error text shows in the report.
inline RunOptions ParseOk(std::vector<std::string> args) {
  ParseOutcome outcome = Parse(std::move(args));
  INFO(outcome.text);
  REQUIRE(outcome.kind == Kind::kRun);
  return outcome.options;
}

// Parses and requires one error line that names every piece in `mentions`.
inline void RequireError(std::vector<std::string> args,
                         std::initializer_list<std::string> mentions) {
  ParseOutcome outcome = Parse(std::move(args));
  INFO(outcome.text);
  REQUIRE(outcome.kind == Kind::kError);
  CHECK(outcome.text.rfind("horovodrun: error: ", 0) == 0);
  CHECK(outcome.text.find('\n') == std::string::npos);
  for (const std::string& mention : mentions) CHECK_THAT(outcome.text, Catch::Contains(mention));
}

inline std::vector<std::string> Argv(const v1::JobSpec& spec) {
  return {spec.argv().begin(), spec.argv().end()};
}

inline std::vector<std::pair<std::string, int>> Hosts(const v1::JobSpec& spec) {
  std::vector<std::pair<std::string, int>> hosts;
  for (const v1::HostSlots& h : spec.discovery().hosts()) hosts.emplace_back(h.host(), h.slots());
  return hosts;
}

// A fresh directory under /tmp, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "hvdd_runopts_XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

  std::string Write(const std::string& name, const std::string& contents, bool executable = false) {
    const fs::path file = path_ / name;
    std::ofstream(file) << contents;
    if (executable) REQUIRE(chmod(file.c_str(), 0755) == 0);
    return file.string();
  }

 private:
  fs::path path_;
};

// Runs the test from `dir` and goes back afterwards (relative paths resolve against it).
class InDirectory {
 public:
  explicit InDirectory(const fs::path& dir) : previous_(fs::current_path()) {
    fs::current_path(dir);
  }
  ~InDirectory() { fs::current_path(previous_); }

 private:
  fs::path previous_;
};

inline constexpr char kScript[] = "#!/bin/sh\necho localhost:2\n";

}  // namespace horovodd::cli::test_support
