// horovodrun's --config-file on arbitrary YAML, then every typed read of every
// setting it holds. The loader reads a path, so each input goes through one
// private temp file (rewritten per input; libFuzzer runs one input at a time
// per process).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cli/horovodrun/config_file.h"

namespace {

// The temp file, removed when the fuzzer exits normally.
class InputFile {
 public:
  InputFile() {
    char pattern[] = "/tmp/hvdd-fuzz-run-config-XXXXXX";
    const int fd = mkstemp(pattern);
    if (fd < 0) std::abort();
    close(fd);
    path_ = pattern;
  }
  ~InputFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::string& InputPath() {
  static const InputFile file;
  return file.path();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(InputPath(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto settings = horovodd::cli::LoadConfigFile(InputPath());
  if (!settings.ok()) {
    if (settings.status().message().empty()) std::abort();
    return 0;
  }
  for (const auto& [key, setting] : *settings) {
    (void)horovodd::cli::ReadInt(*settings, key, 0);
    (void)horovodd::cli::ReadSeconds(*settings, key, 1.0);
    (void)horovodd::cli::ReadBool(*settings, key);
    for (const std::string& value : setting.values) {
      (void)horovodd::cli::ParseSeconds(setting, value, true);
    }
  }
  return 0;
}
