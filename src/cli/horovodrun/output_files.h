// horovodrun's copy of each rank's output under --output-filename DIR, in Horovod's layout:
// DIR/rank.<rank>/stdout and DIR/rank.<rank>/stderr, the rank padded with zeros to the width
// of the highest initial rank so that the directories sort in rank order. The files hold the
// lines as the terminal shows them ("[1]<stdout>:..."), as Horovod's do. A file is truncated
// when this run first writes to it.
//
// Threading: one thread (horovodrun's event loop) uses it.
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace horovodd::cli {

// Horovod's padding: "3" of 4 processes, "03" of 12.
std::string PaddedRank(int rank, int num_proc);

// The time as Horovod prefixes output lines with it (Python's time.asctime(), local time):
// "Wed Dec  2 02:14:17 2026".
std::string AsctimeNow();

class RankOutputFiles {
 public:
  // Makes `dir` (and its parents) if needed. INVALID_ARGUMENT naming it when it cannot be made.
  static absl::StatusOr<std::unique_ptr<RankOutputFiles>> Open(const std::string& dir,
                                                               int num_proc);

  // Appends `line` and a newline to rank's `stream` ("stdout" or "stderr") file, flushed. A
  // line of no rank (rank < 0) or a file that cannot be written is dropped: the terminal still
  // has it. The first failure per file is returned once, for one warning.
  absl::Status Write(int rank, const std::string& stream, const std::string& line);

 private:
  RankOutputFiles(std::string dir, int num_proc) : dir_(std::move(dir)), num_proc_(num_proc) {}

  const std::string dir_;
  const int num_proc_;
  // (rank, stream) -> its file; nullptr once it failed.
  std::map<std::pair<int, std::string>, std::unique_ptr<std::ofstream>> files_;
};

}  // namespace horovodd::cli
