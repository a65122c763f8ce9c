#include "daemon/status_page/page_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "message_json/message_json.h"

namespace horovodd::daemon {
namespace {

constexpr JsonStyle kOneLine{0};

// {"KEY":[a,b,...]} of messages.
template <typename Message>
std::string ArrayJson(absl::string_view key, const std::vector<Message>& messages) {
  std::string out = absl::StrCat("{", JsonQuote(std::string_view(key.data(), key.size())), ":[");
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i > 0) out += ',';
    out += MessageToJson(messages[i], kOneLine);
  }
  out += "]}";
  return out;
}

}  // namespace

v1::JobStatus JobSummary(const v1::JobStatus& status) {
  v1::JobStatus summary = status;
  summary.clear_workers();
  summary.clear_hosts();
  summary.clear_reset_history();
  summary.clear_recent_events();
  summary.mutable_spec()->clear_env();
  return summary;
}

std::string JobsJson(const std::vector<v1::JobStatus>& jobs) {
  std::vector<v1::JobStatus> summaries;
  summaries.reserve(jobs.size());
  for (const v1::JobStatus& job : jobs) summaries.push_back(JobSummary(job));
  return ArrayJson("jobs", summaries);
}

std::string JobJson(const v1::JobStatus& status) { return MessageToJson(status, kOneLine); }

std::string EventsJson(const std::vector<v1::JobEvent>& events) {
  return ArrayJson("events", events);
}

std::string SessionJson(bool admin, absl::Time now) {
  return absl::StrCat("{\"access\":", admin ? "\"admin\"" : "\"read\"", ",\"server_time_unix\":",
                      JsonNumber(absl::ToDoubleSeconds(now - absl::UnixEpoch())), "}");
}

std::string ErrorJson(absl::string_view message) {
  return absl::StrCat("{\"error\":", JsonQuote(std::string_view(message.data(), message.size())),
                      "}");
}

std::string SseEvent(absl::string_view name, absl::string_view data, std::optional<uint64_t> id) {
  std::string out;
  if (id) absl::StrAppend(&out, "id: ", *id, "\n");
  absl::StrAppend(&out, "event: ", name, "\n");
  for (absl::string_view line : absl::StrSplit(data, '\n')) {
    absl::StrAppend(&out, "data: ", line, "\n");
  }
  out += "\n";
  return out;
}

}  // namespace horovodd::daemon
