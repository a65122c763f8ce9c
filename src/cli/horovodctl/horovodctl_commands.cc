#include "cli/horovodctl/horovodctl_commands.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "message_json/message_json.h"

namespace horovodd::cli {
namespace {

bool Json(const CommandContext& ctx) { return ctx.format == OutputFormat::kJson; }

// Documents end with a newline, and reach a pipe now rather than at exit.
void Emit(const CommandContext& ctx, const std::string& text) {
  *ctx.out << text;
  if (text.empty() || text.back() != '\n') *ctx.out << '\n';
  ctx.out->flush();
}

}  // namespace

absl::Status ListJobs(const CommandContext& ctx) {
  HVDD_ASSIGN_OR_RETURN(auto jobs, ctx.client->ListJobs());
  // Oldest first; the daemon's order is by id as text (job-10 before job-2).
  std::stable_sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) {
    return a.created_unix() < b.created_unix();
  });
  if (Json(ctx)) {
    v1::ListJobsResponse response;
    for (auto& job : jobs) *response.add_jobs() = std::move(job);
    Emit(ctx, MessageToJson(response));
  } else {
    Emit(ctx, FormatJobTable(jobs, absl::Now()));
  }
  return absl::OkStatus();
}

absl::Status ShowJob(const CommandContext& ctx, const std::string& job_id) {
  HVDD_ASSIGN_OR_RETURN(auto job, ctx.client->GetJob(job_id));
  Emit(ctx, Json(ctx) ? MessageToJson(job) : FormatJobDetails(job, absl::Now(), ctx.zone));
  return absl::OkStatus();
}

absl::Status ShowHosts(const CommandContext& ctx) {
  HVDD_ASSIGN_OR_RETURN(auto jobs, ctx.client->ListJobs());
  const std::vector<HostRow> rows = HostsOfRunningJobs(jobs);
  Emit(ctx, Json(ctx) ? HostRowsToJson(rows) : FormatHostTable(rows));
  return absl::OkStatus();
}

absl::Status ShowLogs(const CommandContext& ctx, const std::string& job_id, int rank,
                      int max_lines) {
  HVDD_ASSIGN_OR_RETURN(auto lines, ctx.client->WorkerOutput(job_id, rank, max_lines));
  if (Json(ctx)) {
    v1::GetWorkerOutputResponse response;
    for (auto& line : lines) *response.add_lines() = std::move(line);
    Emit(ctx, MessageToJson(response));
    return absl::OkStatus();
  }
  // The lines as the worker wrote them, stdout and stderr in their order.
  for (const auto& line : lines) *ctx.out << line.message() << '\n';
  ctx.out->flush();
  return absl::OkStatus();
}

absl::Status CancelJob(const CommandContext& ctx, const CancelOptions& options) {
  HVDD_ASSIGN_OR_RETURN(auto before, ctx.client->GetJob(options.job_id));
  if (IsTerminal(before.state())) {
    Emit(ctx, Json(ctx) ? MessageToJson(before)
                        : absl::StrCat(options.job_id,
                                       " had already ended: ", v1::JobState_Name(before.state())));
    return absl::OkStatus();
  }
  HVDD_RETURN_IF_ERROR(ctx.client->CancelJob(options.job_id, options.reason));
  if (options.wait) {
    bool ended = false;
    auto st = ctx.client->Watch(options.job_id, 0, [&ended](const v1::JobEvent& e) {
      if (e.kind() == v1::JobEvent::JOB_ENDED) ended = true;
    });
    if (!st.ok()) return st;
    if (!ended) {
      return absl::UnavailableError(absl::StrCat("horovodd at ", ctx.client->address(),
                                                 " stopped reporting on ", options.job_id,
                                                 " before it ended"));
    }
  }
  if (Json(ctx)) return ShowJob(ctx, options.job_id);
  if (!options.wait) {
    Emit(ctx, absl::StrCat(options.job_id, " is being cancelled"));
    return absl::OkStatus();
  }
  HVDD_ASSIGN_OR_RETURN(auto after, ctx.client->GetJob(options.job_id));
  Emit(ctx, absl::StrCat(options.job_id, " ended ", v1::JobState_Name(after.state()), ": ",
                         after.reason()));
  return absl::OkStatus();
}

absl::Status SetDrained(const CommandContext& ctx, const std::string& host,
                        const std::string& job_id, bool drained) {
  HVDD_ASSIGN_OR_RETURN(auto jobs, ctx.client->SetDrained(host, job_id, drained));
  if (Json(ctx)) {
    std::vector<std::string> quoted;
    for (const auto& id : jobs) quoted.push_back(JsonQuote(id));
    Emit(ctx, absl::StrCat("{\n  \"host\": ", JsonQuote(host),
                           ",\n  \"drained\": ", drained ? "true" : "false", ",\n  \"job_ids\": [",
                           absl::StrJoin(quoted, ", "), "]\n}"));
    return absl::OkStatus();
  }
  const char* verb = drained ? "drained" : "undrained";
  if (jobs.empty()) {
    Emit(ctx, absl::StrCat("host ", host, " ", verb, " in no job: no job is running"));
  } else {
    Emit(ctx, absl::StrCat("host ", host, " ", verb, " in ", absl::StrJoin(jobs, ", ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> WatchJob(const CommandContext& ctx, const std::string& job_id,
                             const WatchFilter& filter) {
  bool ended = false;
  bool succeeded = false;
  auto st = ctx.client->Watch(job_id, 0, [&](const v1::JobEvent& event) {
    if (event.kind() == v1::JobEvent::JOB_ENDED) {
      ended = true;
      succeeded = event.state() == v1::SUCCEEDED;
    }
    if (Json(ctx)) {
      if (WatchShows(event, filter)) Emit(ctx, MessageToJson(event, JsonStyle{0}));
    } else if (auto line = FormatWatchLine(event, filter, ctx.zone)) {
      Emit(ctx, *line);
    }
  });
  if (!st.ok()) return st;
  if (!ended) {
    return absl::UnavailableError(absl::StrCat("horovodd at ", ctx.client->address(),
                                               " ended the watch of ", job_id,
                                               " before the job ended"));
  }
  return succeeded ? 0 : 1;
}

absl::Status StopDaemon(const CommandContext& ctx, bool stop_jobs, const std::string& reason) {
  HVDD_ASSIGN_OR_RETURN(v1::StopDaemonResponse response,
                        ctx.client->StopDaemon(stop_jobs, reason));
  if (Json(ctx)) {
    Emit(ctx, MessageToJson(response));
    return absl::OkStatus();
  }
  const int running = response.running_jobs();
  const std::string jobs = absl::StrCat(running, running == 1 ? " running job" : " running jobs");
  Emit(ctx, absl::StrCat("horovodd at ", ctx.client->address(), " is stopping; ",
                         running == 0                   ? "no job was running"
                         : response.jobs_left_running() ? absl::StrCat(jobs,
                                                                       " left running for "
                                                                       "the next horovodd")
                                                        : absl::StrCat("ending ", jobs)));
  return absl::OkStatus();
}

}  // namespace horovodd::cli
