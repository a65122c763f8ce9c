#include "train_result.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace horovodd::examples {
namespace {

// JSON has no NaN or infinity (a diverged run): those become null.
std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

}  // namespace

std::string ResultToJson(const TrainResult& result) {
  std::ostringstream json;
  json << "{\n  \"epochs_completed\": " << result.epochs_completed
       << ",\n  \"samples_per_epoch\": [";
  for (size_t i = 0; i < result.samples_per_epoch.size(); ++i) {
    json << (i == 0 ? "" : ", ") << result.samples_per_epoch[i];
  }
  json << "],\n  \"resets\": " << result.resets << ",\n  \"final_size\": " << result.final_size
       << ",\n  \"weight_error\": " << JsonNumber(result.weight_error)
       << ",\n  \"steps\": " << result.steps << "\n}\n";
  return json.str();
}

absl::Status WriteResultFile(const std::string& path, const TrainResult& result) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << ResultToJson(result);
    out.close();
    if (!out) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot write --output file ", temporary));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot rename ", temporary, " to --output file ", path));
  }
  return absl::OkStatus();
}

}  // namespace horovodd::examples
