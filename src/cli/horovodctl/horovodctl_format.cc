#include "cli/horovodctl/horovodctl_format.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/horovodctl/horovodctl_table.h"
#include "message_json/message_json.h"

namespace horovodd::cli {
namespace {

constexpr size_t kListCommandWidth = 60;

absl::Time FromUnix(double seconds) { return absl::UnixEpoch() + absl::Seconds(seconds); }

std::string ClockTime(double unix_seconds, absl::TimeZone zone) {
  return absl::FormatTime("%H:%M:%E3S", FromUnix(unix_seconds), zone);
}

std::string DateTime(double unix_seconds, absl::Time now, absl::TimeZone zone) {
  if (unix_seconds <= 0) return "-";
  return absl::StrCat(absl::FormatTime("%Y-%m-%d %H:%M:%S", FromUnix(unix_seconds), zone), " (",
                      HumanDuration(now - FromUnix(unix_seconds)), " ago)");
}

// argv as a person would type it: arguments with blanks or quotes in single quotes.
std::string CommandLine(const v1::JobSpec& spec) {
  return absl::StrJoin(spec.argv(), " ", [](std::string* out, const std::string& arg) {
    if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$") == std::string::npos) {
      out->append(arg);
      return;
    }
    out->append("'");
    for (char c : arg) out->append(c == '\'' ? "'\\''" : std::string(1, c));
    out->append("'");
  });
}

std::string Truncated(std::string text, size_t width) {
  if (text.size() <= width) return text;
  text.resize(width - 3);
  return text + "...";
}

std::string StateName(v1::JobState state) {
  return state == v1::JOB_STATE_UNSPECIFIED ? "UNKNOWN" : v1::JobState_Name(state);
}

// WORKER_RUNNING -> RUNNING.
std::string WorkerStateName(v1::WorkerState state) {
  std::string name = v1::WorkerState_Name(state);
  const std::string prefix = "WORKER_";
  if (name.rfind(prefix, 0) == 0) name.erase(0, prefix.size());
  return name;
}

std::string MaxNp(int max_np) { return max_np > 0 ? std::to_string(max_np) : "unlimited"; }

std::string KindName(v1::JobEvent::Kind kind) {
  switch (kind) {
    case v1::JobEvent::OUTPUT:
      return "output";
    case v1::JobEvent::INFO:
      return "info";
    case v1::JobEvent::WARNING:
      return "warning";
    case v1::JobEvent::MEMBERSHIP:
      return "membership";
    case v1::JobEvent::JOB_ENDED:
      return "ended";
    case v1::JobEvent::STATE:
      return "state";
    default:
      return "event";
  }
}

// What a worker waits in: "allreduce grad.w1 (12s)", "-" when in nothing,
// "" when it reported nothing (an older worker, or one that exited).
std::string WaitsIn(const v1::WorkerStatus& w) {
  if (!w.has_activity()) return "";
  if (!w.activity().has_waiting()) return "-";
  const v1::CollectiveWait& wait = w.activity().waiting();
  std::string text = absl::StrCat(wait.operation(), " ", Truncated(wait.name(), 40));
  if (wait.process_set() != 0) absl::StrAppend(&text, " [set ", wait.process_set(), "]");
  absl::StrAppend(&text, " (", HumanDuration(absl::Seconds(wait.waited_seconds())), ")");
  return text;
}

// The worker's step time (the mean interval between its recent commits).
std::string StepTime(const v1::WorkerStatus& w) {
  if (!w.has_activity() || w.activity().step_seconds() <= 0) return "-";
  return absl::StrFormat("%.3gs", w.activity().step_seconds());
}

std::string WorkersTable(const v1::JobStatus& job) {
  std::vector<const v1::WorkerStatus*> workers;
  for (const auto& w : job.workers()) workers.push_back(&w);
  // Members in rank order first, then the others (starting, gone) by worker id.
  std::stable_sort(workers.begin(), workers.end(), [](const auto* a, const auto* b) {
    const bool a_member = a->rank() >= 0, b_member = b->rank() >= 0;
    if (a_member != b_member) return a_member;
    return a_member ? a->rank() < b->rank() : a->worker_id() < b->worker_id();
  });
  // What the workers report doing, once some worker has reported it.
  const bool reported =
      std::any_of(workers.begin(), workers.end(), [](const auto* w) { return w->has_activity(); });
  std::vector<std::string> headers = {"RANK",  "WORKER", "HOST",   "PID",
                                      "STATE", "EXIT",   "RESETS", "LAST COMMIT"};
  if (reported) headers.insert(headers.end(), {"DONE", "STEP", "WAITS IN"});
  // How much each rank costs the others per step, once the daemon has measured some.
  const bool measured = std::any_of(workers.begin(), workers.end(), [](const auto* w) {
    return w->lost_seconds_per_step() > 0 || w->straggler();
  });
  if (measured) headers.push_back("LOST/STEP");
  TextTable table(std::move(headers));
  for (const auto* w : workers) {
    const bool exited = w->state() == v1::WORKER_SUCCEEDED || w->state() == v1::WORKER_FAILED ||
                        w->state() == v1::WORKER_REMOVED;
    std::vector<std::string> row = {w->rank() >= 0 ? std::to_string(w->rank()) : "-",
                                    std::to_string(w->worker_id()),
                                    w->host(),
                                    w->pid() > 0 ? std::to_string(w->pid()) : "-",
                                    WorkerStateName(w->state()),
                                    exited ? std::to_string(w->exit_code()) : "-",
                                    std::to_string(w->resets()),
                                    std::to_string(w->last_commit())};
    if (reported) {
      row.insert(row.end(), {w->has_activity() ? std::to_string(w->activity().completed()) : "-",
                             StepTime(*w), WaitsIn(*w)});
    }
    if (measured) {
      row.push_back(w->lost_seconds_per_step() <= 0
                        ? "-"
                        : absl::StrFormat("%.3gs%s", w->lost_seconds_per_step(),
                                          w->straggler() ? " straggler" : ""));
    }
    table.AddRow(std::move(row));
  }
  return table.Render();
}

std::string HostsTable(const v1::JobStatus& job) {
  TextTable table({"HOST", "SLOTS", "STATE", "COOLDOWN LEFT"});
  for (const auto& h : job.hosts()) {
    table.AddRow({h.host(), std::to_string(h.slots()), h.state(),
                  h.cooldown_seconds_left() > 0
                      ? HumanDuration(absl::Seconds(h.cooldown_seconds_left()))
                      : "-"});
  }
  return table.Render();
}

// Each reset with its three moments as latencies from the moment it was detected.
std::string ResetsTable(const v1::JobStatus& job, absl::TimeZone zone) {
  TextTable table({"GENERATION", "DETECTED", "TO READY", "TO RESUMED", "CAUSE"});
  for (const auto& r : job.reset_history()) {
    auto since_detected = [&](double t) {
      return t > 0 ? Latency(t - r.detected_unix()) : std::string("-");
    };
    table.AddRow({std::to_string(r.generation()), ClockTime(r.detected_unix(), zone),
                  since_detected(r.ready_unix()), since_detected(r.resumed_unix()), r.cause()});
  }
  return table.Render();
}

// The parts of a job's wall time, in the order they are shown (the names
// /metrics gives them as its `part` label).
std::vector<std::pair<const char*, double>> GoodputParts(const v1::JobGoodput& g) {
  return {{"training", g.training_seconds()}, {"starting", g.starting_seconds()},
          {"waiting", g.waiting_seconds()},   {"detection", g.detection_seconds()},
          {"reset", g.reset_seconds()},       {"replay", g.replay_seconds()},
          {"stall", g.stall_seconds()}};
}

bool HasGoodput(const v1::JobStatus& job) {
  return job.has_goodput() && job.goodput().wall_seconds() > 0;
}

std::string Percent(double ratio) { return absl::StrFormat("%.1f%%", 100 * ratio); }

// Where the job's wall time went: each part, its seconds and its share.
std::string GoodputTable(const v1::JobGoodput& g) {
  TextTable table({"PART", "SECONDS", "SHARE"});
  for (const auto& [name, seconds] : GoodputParts(g)) {
    table.AddRow({name, absl::StrFormat("%.3f", seconds), Percent(seconds / g.wall_seconds())});
  }
  return table.Render();
}

// The stall the daemon named: what the others wait in, and who holds them up.
std::string StallSection(const v1::StallReport& stall, absl::TimeZone zone) {
  const v1::CollectiveWait& c = stall.collective();
  std::string out = absl::StrCat(
      "  ", stall.waiting_ranks_size(), " rank(s) wait in ", c.operation(), " '",
      Truncated(c.name(), 60), "' since ", ClockTime(c.since_unix(), zone), " (",
      HumanDuration(absl::Seconds(c.waited_seconds())), "); culprits ",
      stall.kind() == "missing" ? "missing from it"
                                : (stall.kind() == "link" ? "at the ends of a stalled link"
                                                          : "unknown: every rank submitted it"),
      stall.evicted() ? ", evicted" : "",
      !stall.evicted() && stall.evict_unix() > 0
          ? absl::StrCat(", evicted at ", ClockTime(stall.evict_unix(), zone))
          : "",
      "\n");
  if (stall.kind() == "link") {
    const v1::StallCulprit* waiting = nullptr;
    const v1::StallCulprit* awaited = nullptr;
    for (const auto& c : stall.culprits()) (c.awaited() ? awaited : waiting) = &c;
    if (waiting != nullptr && awaited != nullptr) {
      absl::StrAppend(&out, "  link between rank ", waiting->rank(), " (", waiting->host(),
                      ", pid ", waiting->pid(), ") and rank ", awaited->rank(), " (",
                      awaited->host(), ", pid ", awaited->pid(), ") stalled: rank ",
                      waiting->rank(), " waits for rank ", awaited->rank(), "'s data\n");
    }
  }
  TextTable table({"RANK", "WORKER", "HOST", "PID", "PEER", "LAST COMMIT AT", "LAST DID"});
  for (const auto& culprit : stall.culprits()) {
    table.AddRow(
        {std::to_string(culprit.rank()), std::to_string(culprit.worker_id()), culprit.host(),
         std::to_string(culprit.pid()), culprit.peer() >= 0 ? std::to_string(culprit.peer()) : "-",
         culprit.last_commit_unix() > 0 ? ClockTime(culprit.last_commit_unix(), zone) : "-",
         culprit.last_did()});
  }
  return absl::StrCat(out, table.Render());
}

}  // namespace

std::string HumanDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  const int64_t ms = absl::ToInt64Milliseconds(d);
  if (ms < 1000) return absl::StrCat(ms, "ms");
  const int64_t s = ms / 1000;
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

std::string Latency(double seconds) { return absl::StrFormat("%.3f s", std::max(0.0, seconds)); }

bool IsTerminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

std::string FormatJobTable(const std::vector<v1::JobStatus>& jobs, absl::Time now) {
  if (jobs.empty()) return "No jobs.\n";
  // GOODPUT only once a daemon that accounts for it answers.
  const bool goodput = std::any_of(jobs.begin(), jobs.end(), HasGoodput);
  std::vector<std::string> header = {"ID",      "STATE",  "GENERATION", "SIZE",
                                     "MIN/MAX", "RESETS", "AGE"};
  if (goodput) header.push_back("GOODPUT");
  header.push_back("COMMAND");
  TextTable table(header);
  for (const auto& job : jobs) {
    std::vector<std::string> row = {
        job.job_id(),
        StateName(job.state()),
        std::to_string(job.generation()),
        std::to_string(job.size()),
        absl::StrCat(job.min_np(), "/",
                     job.max_np() > 0 ? std::to_string(job.max_np()) : std::string("-")),
        std::to_string(job.resets()),
        job.created_unix() > 0 ? HumanDuration(now - FromUnix(job.created_unix())) : "-"};
    if (goodput) row.push_back(HasGoodput(job) ? Percent(job.goodput().goodput()) : "-");
    row.push_back(Truncated(CommandLine(job.spec()), kListCommandWidth));
    table.AddRow(row);
  }
  return table.Render();
}

std::string FormatJobDetails(const v1::JobStatus& job, absl::Time now, absl::TimeZone zone) {
  std::string out;
  auto field = [&out](const char* name, const std::string& value) {
    absl::StrAppendFormat(&out, "%-13s %s\n", absl::StrCat(name, ":"), value);
  };
  field("Job", job.spec().name().empty()
                   ? job.job_id()
                   : absl::StrCat(job.job_id(), " (", job.spec().name(), ")"));
  field("State", StateName(job.state()));
  if (!job.reason().empty()) field("Reason", job.reason());
  field("Command", CommandLine(job.spec()));
  field("Generation", std::to_string(job.generation()));
  field("Size",
        absl::StrCat(job.size(), " (min ", job.min_np(), ", max ", MaxNp(job.max_np()), ")"));
  field("Resets", std::to_string(job.resets()));
  if (job.spec().hot_spares() > 0) {
    int ready = 0, starting = 0;
    for (const auto& w : job.workers()) {
      ready += w.state() == v1::WORKER_SPARE_READY;
      starting += w.state() == v1::WORKER_SPARE_STARTING;
    }
    field("Hot spares", absl::StrCat(ready, " ready, ", starting, " starting (of ",
                                     job.spec().hot_spares(), "; in Workers, RANK -)"));
  }
  field("Last commit", std::to_string(job.last_commit()));
  field("Created", DateTime(job.created_unix(), now, zone));
  field("Started", DateTime(job.started_unix(), now, zone));
  if (job.ended_unix() > 0) field("Ended", DateTime(job.ended_unix(), now, zone));
  if (HasGoodput(job)) {
    field("Goodput",
          absl::StrCat(Percent(job.goodput().goodput()), " (training ",
                       HumanDuration(absl::Seconds(job.goodput().training_seconds())), " of ",
                       HumanDuration(absl::Seconds(job.goodput().wall_seconds())), ")"));
  }

  if (job.has_stall()) absl::StrAppend(&out, "\nStall:\n", StallSection(job.stall(), zone));
  absl::StrAppend(&out, "\nWorkers:\n", job.workers().empty() ? "  none\n" : WorkersTable(job));
  absl::StrAppend(&out, "\nHosts:\n", job.hosts().empty() ? "  none known yet\n" : HostsTable(job));
  absl::StrAppend(&out, "\nResets:\n",
                  job.reset_history().empty() ? "  none\n" : ResetsTable(job, zone));
  if (HasGoodput(job)) absl::StrAppend(&out, "\nTime:\n", GoodputTable(job.goodput()));
  absl::StrAppend(&out, "\nRecent events:\n");
  if (job.recent_events().empty()) absl::StrAppend(&out, "  none\n");
  for (const auto& e : job.recent_events()) {
    absl::StrAppendFormat(&out, "%s  %-10s  %s\n", ClockTime(e.time_unix(), zone),
                          KindName(e.kind()), e.message());
  }
  return out;
}

std::vector<HostRow> HostsOfRunningJobs(const std::vector<v1::JobStatus>& jobs) {
  std::vector<HostRow> rows;
  for (const auto& job : jobs) {
    if (IsTerminal(job.state())) continue;
    for (const auto& h : job.hosts()) {
      rows.push_back({h.host(), job.job_id(), h.slots(), h.state(), h.cooldown_seconds_left()});
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const HostRow& a, const HostRow& b) { return a.host < b.host; });
  return rows;
}

std::string FormatHostTable(const std::vector<HostRow>& rows) {
  if (rows.empty()) return "No running jobs, so no hosts in use.\n";
  TextTable table({"HOST", "JOB", "SLOTS", "STATE", "COOLDOWN LEFT"});
  for (const auto& row : rows) {
    table.AddRow({row.host, row.job_id, std::to_string(row.slots), row.state,
                  row.cooldown_seconds_left > 0
                      ? HumanDuration(absl::Seconds(row.cooldown_seconds_left))
                      : "-"});
  }
  return table.Render();
}

std::string HostRowsToJson(const std::vector<HostRow>& rows) {
  std::string out = "{\n  \"hosts\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const HostRow& r = rows[i];
    absl::StrAppend(&out, i > 0 ? "," : "", "\n    {\"host\": ", JsonQuote(r.host),
                    ", \"job_id\": ", JsonQuote(r.job_id), ", \"slots\": ", r.slots,
                    ", \"state\": ", JsonQuote(r.state),
                    ", \"cooldown_seconds_left\": ", JsonNumber(r.cooldown_seconds_left), "}");
  }
  absl::StrAppend(&out, rows.empty() ? "]\n}" : "\n  ]\n}");
  return out;
}

bool WatchShows(const v1::JobEvent& event, const WatchFilter& filter) {
  switch (event.kind()) {
    case v1::JobEvent::OUTPUT:
      return filter.output_lines;
    case v1::JobEvent::INFO:
      return filter.info;
    default:
      return true;
  }
}

std::optional<std::string> FormatWatchLine(const v1::JobEvent& event, const WatchFilter& filter,
                                           absl::TimeZone zone) {
  if (!WatchShows(event, filter)) return std::nullopt;
  if (event.kind() == v1::JobEvent::OUTPUT) {
    // As horovodrun prints worker output, so the same greps work on both.
    return absl::StrCat("[", event.rank(), "]<", event.stream(), ">:", event.message());
  }
  std::string text;
  switch (event.kind()) {
    case v1::JobEvent::MEMBERSHIP:
      text = absl::StrCat("generation ", event.generation(), " ready: size ", event.size());
      if (event.reset_seconds() > 0)
        absl::StrAppend(&text, ", reset ", Latency(event.reset_seconds()));
      break;
    case v1::JobEvent::STATE:
      text = absl::StrCat("job is ", StateName(event.state()));
      break;
    case v1::JobEvent::JOB_ENDED:
      text = absl::StrCat("job ended ", StateName(event.state()), ": ", event.message());
      break;
    default:
      text = event.message();
  }
  return absl::StrFormat("%s  %-10s  %s", ClockTime(event.time_unix(), zone),
                         KindName(event.kind()), text);
}

}  // namespace horovodd::cli
