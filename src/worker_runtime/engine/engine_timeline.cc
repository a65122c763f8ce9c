#include "worker_runtime/engine/engine_timeline.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "worker_runtime/engine/engine_request.h"

namespace horovodd::internal {

std::string TimelineOperation(const std::string& operation) {
  return absl::AsciiStrToUpper(operation);
}
std::string TimelineOperationOf(const Request& request) {
  switch (request.kind) {
    case RequestKind::kAllreduce:
      return "ALLREDUCE";
    case RequestKind::kBroadcast:
      return "BROADCAST";
    case RequestKind::kAllgather:
      return "ALLGATHER";
    case RequestKind::kJoin:
      return "JOIN";
    case RequestKind::kReducescatter:
      return "REDUCESCATTER";
    case RequestKind::kOpaque:
      break;
  }
  std::string operation = request.opaque_operation;
  operation = operation.substr(0, operation.find(' '));  // "add_process_set [0, 1]"
  return TimelineOperation(operation);
}

absl::StatusOr<std::unique_ptr<Timeline>> Timeline::Open(const std::string& path,
                                                         bool mark_cycles) {
  if (path.empty()) return absl::InvalidArgumentError("the timeline needs a file name");
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot write the timeline to ", path, ": ", std::strerror(errno)));
  }
  std::fputs("[\n", file);
  return std::unique_ptr<Timeline>(new Timeline(file, mark_cycles));
}

Timeline::Timeline(std::FILE* file, bool mark_cycles) : mark_cycles_(mark_cycles), file_(file) {}

Timeline::~Timeline() { Stop(); }

int64_t Timeline::Now() const { return absl::ToInt64Microseconds(absl::Now() - started_); }

void Timeline::Write(const std::string& event) {
  if (file_ == nullptr) return;
  if (!first_event_) std::fputs(",\n", file_);
  first_event_ = false;
  std::fputs(event.c_str(), file_);
}

int Timeline::ProcessOf(const std::string& tensor) {
  auto [it, added] = processes_.emplace(tensor, static_cast<int>(processes_.size()) + 1);
  if (added) {
    // Chrome's metadata events: the row's name and its place (first seen
    // first).
    Write(absl::StrCat(R"({"name": "process_name", "ph": "M", "pid": )", it->second,
                       R"(, "args": {"name": )", JsonQuote(UserFacingName(tensor)), "}}"));
    Write(absl::StrCat(R"({"name": "process_sort_index", "ph": "M", "pid": )", it->second,
                       R"(, "args": {"sort_index": )", it->second, "}}"));
  }
  return it->second;
}

void Timeline::NegotiateStart(const std::string& tensor, const std::string& operation) {
  absl::MutexLock lock(&mu_);
  const int pid = ProcessOf(tensor);
  Write(absl::StrCat(R"({"name": )", JsonQuote(absl::StrCat("NEGOTIATE_", operation)),
                     R"(, "ph": "B", "ts": )", Now(), R"(, "pid": )", pid, R"(, "tid": 1})"));
  open_[tensor] = 1;
}

void Timeline::NegotiateEnd(const std::string& tensor, const std::string& operation) {
  absl::MutexLock lock(&mu_);
  const int pid = ProcessOf(tensor);
  const int64_t now = Now();
  int& open = open_[tensor];
  if (open > 0) {
    Write(absl::StrCat(R"({"ph": "E", "ts": )", now, R"(, "pid": )", pid, R"(, "tid": 1})"));
    --open;
  }
  Write(absl::StrCat(R"({"name": )", JsonQuote(operation), R"(, "ph": "B", "ts": )", now,
                     R"(, "pid": )", pid, R"(, "tid": 1})"));
  Write(absl::StrCat(R"({"name": "WAIT_FOR_DATA", "ph": "B", "ts": )", now, R"(, "pid": )", pid,
                     R"(, "tid": 1})"));
  open += 2;
}

void Timeline::ActivityStart(const std::string& tensor, const std::string& activity,
                             const std::string& batch, int batch_size) {
  absl::MutexLock lock(&mu_);
  const int pid = ProcessOf(tensor);
  const int64_t now = Now();
  int& open = open_[tensor];
  if (open >= 2) {  // inside <OP>: WAIT_FOR_DATA or the previous activity ends
    Write(absl::StrCat(R"({"ph": "E", "ts": )", now, R"(, "pid": )", pid, R"(, "tid": 1})"));
    --open;
  }
  Write(absl::StrCat(R"({"name": )", JsonQuote(activity), R"(, "ph": "B", "ts": )", now,
                     R"(, "pid": )", pid, R"(, "tid": 1, "args": {"batch": )", JsonQuote(batch),
                     R"(, "tensors_in_batch": )", batch_size, "}}"));
  ++open;
}

void Timeline::End(const std::string& tensor, const std::string& error) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(tensor);
  if (it == open_.end()) return;
  const int pid = ProcessOf(tensor);
  const int64_t now = Now();
  for (int i = 0; i < it->second; ++i) {
    std::string args;
    if (i + 1 == it->second && !error.empty()) {
      args = absl::StrCat(R"(, "args": {"error": )", JsonQuote(error), "}");
    }
    Write(absl::StrCat(R"({"ph": "E", "ts": )", now, R"(, "pid": )", pid, R"(, "tid": 1)", args,
                       "}"));
  }
  open_.erase(it);
}

void Timeline::CycleStart() {
  absl::MutexLock lock(&mu_);
  Write(absl::StrCat(R"({"name": "CYCLE_START", "ph": "i", "s": "g", "ts": )", Now(),
                     R"(, "pid": 0, "tid": 0})"));
}

void Timeline::Stop() {
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  const int64_t now = Now();
  for (const auto& [tensor, open] : open_) {
    const int pid = processes_[tensor];
    for (int i = 0; i < open; ++i) {
      Write(absl::StrCat(R"({"ph": "E", "ts": )", now, R"(, "pid": )", pid, R"(, "tid": 1})"));
    }
  }
  open_.clear();
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace horovodd::internal
