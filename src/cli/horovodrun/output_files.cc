#include "cli/horovodrun/output_files.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace horovodd::cli {

namespace fs = std::filesystem;

std::string PaddedRank(int rank, int num_proc) {
  const size_t width = std::to_string(num_proc > 1 ? num_proc - 1 : 0).size();
  std::string text = std::to_string(rank);
  if (text.size() < width) text.insert(0, width - text.size(), '0');
  return text;
}

std::string AsctimeNow() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[64];
  // asctime's layout without its newline: the day of the month padded with a space.
  const size_t n = std::strftime(buffer, sizeof(buffer), "%a %b %e %H:%M:%S %Y", &local);
  return std::string(buffer, n);
}

absl::StatusOr<std::unique_ptr<RankOutputFiles>> RankOutputFiles::Open(const std::string& dir,
                                                                       int num_proc) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return absl::InvalidArgumentError(absl::StrCat("--output-filename ", dir,
                                                   ": cannot make the directory (",
                                                   ec ? ec.message() : "not a directory", ")"));
  }
  return std::unique_ptr<RankOutputFiles>(new RankOutputFiles(dir, num_proc));
}

absl::Status RankOutputFiles::Write(int rank, const std::string& stream, const std::string& line) {
  if (rank < 0) return absl::OkStatus();
  auto [it, inserted] = files_.try_emplace({rank, stream});
  if (inserted) {
    const fs::path rank_dir = fs::path(dir_) / absl::StrCat("rank.", PaddedRank(rank, num_proc_));
    std::error_code ec;
    fs::create_directories(rank_dir, ec);
    auto file = std::make_unique<std::ofstream>(rank_dir / stream, std::ios::trunc);
    if (ec || !*file) {
      return absl::UnavailableError(absl::StrCat("cannot write ", (rank_dir / stream).string(),
                                                 ": ", ec ? ec.message() : std::strerror(errno)));
    }
    it->second = std::move(file);
  }
  if (it->second == nullptr) return absl::OkStatus();
  *it->second << line << '\n';
  it->second->flush();
  if (!*it->second) {
    it->second.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot write rank ", rank, "'s ", stream, " under ", dir_));
  }
  return absl::OkStatus();
}

}  // namespace horovodd::cli
