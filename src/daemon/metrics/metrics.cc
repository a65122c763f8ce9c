#include "daemon/metrics/metrics.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace horovodd::daemon {
namespace {

bool Terminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

// A label value: backslash, double quote and newline escaped, as the format wants.
std::string LabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double value) { return absl::StrFormat("%.9g", value); }

void Header(std::string& out, const char* name, const char* type, const char* help) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

void Metrics::SetState(Job& job, v1::JobState state) {
  job.state = state;
  if (Terminal(state)) job.workers = 0;
}

void Metrics::OnJobSubmitted(const std::string& job_id, const v1::JobSpec&, absl::Time,
                             const std::string&) {
  absl::MutexLock lock(&mu_);
  jobs_[job_id] = Job{};
}

void Metrics::AddRecoveredJob(const std::string& job_id, v1::JobState state) {
  absl::MutexLock lock(&mu_);
  SetState(jobs_[job_id], state);
}

void Metrics::OnJobEvent(const std::string& job_id, const v1::JobEvent& event) {
  if (event.kind() == v1::JobEvent::OUTPUT) return;
  absl::MutexLock lock(&mu_);
  Job& job = jobs_[job_id];
  switch (event.kind()) {
    case v1::JobEvent::STATE:
      if (event.state() == v1::RESETTING && job.state != v1::RESETTING) ++resets_;
      SetState(job, event.state());
      break;
    case v1::JobEvent::JOB_ENDED:
      SetState(job, event.state());
      break;
    case v1::JobEvent::MEMBERSHIP:
      if (!Terminal(job.state)) job.workers = event.size();
      // Only a reset's new generation has a latency; the first one has none.
      if (event.reset_seconds() > 0) {
        for (size_t i = 0; i < kResetLatencyBuckets.size(); ++i) {
          if (event.reset_seconds() <= kResetLatencyBuckets[i]) {
            ++reset_buckets_[i];
            break;
          }
        }
        ++reset_count_;
        reset_seconds_sum_ += event.reset_seconds();
      }
      break;
    default:
      break;
  }
  if (event.code() == "discovery_failed") ++discovery_failures_;
  if (event.code() == "worker_failed" || event.code() == "worker_lost") ++worker_failures_;
  if (event.code() == "spare_swapped") ++spare_swaps_;
}

void Metrics::CountRpc(const std::string& method) {
  // gRPC names methods "/package.Service/Method"; the label drops the slash.
  std::string name = method.empty() || method[0] != '/' ? method : method.substr(1);
  absl::MutexLock lock(&mu_);
  if (rpcs_.count(name) == 0 && rpcs_.size() >= kMaxRpcMethods) name = "other";
  ++rpcs_[name];
}

std::string Metrics::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;

  Header(out, "horovodd_jobs", "gauge", "Jobs the daemon knows, by state.");
  std::map<v1::JobState, int> by_state;
  int workers = 0;
  for (const auto& [id, job] : jobs_) {
    ++by_state[job.state];
    workers += job.workers;
  }
  for (v1::JobState state :
       {v1::PENDING, v1::RUNNING, v1::RESETTING, v1::SUCCEEDED, v1::FAILED, v1::CANCELLED}) {
    absl::StrAppend(&out, "horovodd_jobs{state=\"", absl::AsciiStrToLower(v1::JobState_Name(state)),
                    "\"} ", by_state[state], "\n");
  }

  Header(out, "horovodd_workers", "gauge",
         "Workers in the current generation of every job that has not ended.");
  absl::StrAppend(&out, "horovodd_workers ", workers, "\n");

  Header(out, "horovodd_resets_total", "counter",
         "Membership resets begun (a job went from running to resetting).");
  absl::StrAppend(&out, "horovodd_resets_total ", resets_, "\n");

  Header(out, "horovodd_reset_latency_seconds", "histogram",
         "Time from a reset's trigger to its new generation being ready.");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kResetLatencyBuckets.size(); ++i) {
    cumulative += reset_buckets_[i];
    absl::StrAppend(&out, "horovodd_reset_latency_seconds_bucket{le=\"",
                    Number(kResetLatencyBuckets[i]), "\"} ", cumulative, "\n");
  }
  absl::StrAppend(&out, "horovodd_reset_latency_seconds_bucket{le=\"+Inf\"} ", reset_count_, "\n",
                  "horovodd_reset_latency_seconds_sum ", Number(reset_seconds_sum_), "\n",
                  "horovodd_reset_latency_seconds_count ", reset_count_, "\n");

  Header(out, "horovodd_discovery_failures_total", "counter",
         "Host discovery failures reported by jobs (each new error once).");
  absl::StrAppend(&out, "horovodd_discovery_failures_total ", discovery_failures_, "\n");

  Header(out, "horovodd_worker_failures_total", "counter",
         "Workers that failed or were declared lost.");
  absl::StrAppend(&out, "horovodd_worker_failures_total ", worker_failures_, "\n");

  Header(out, "horovodd_spare_swaps_total", "counter",
         "Hot spares that took a member's place in a new generation.");
  absl::StrAppend(&out, "horovodd_spare_swaps_total ", spare_swaps_, "\n");

  Header(out, "horovodd_rpc_requests_total", "counter", "gRPC calls received, by method.");
  for (const auto& [method, count] : rpcs_) {
    absl::StrAppend(&out, "horovodd_rpc_requests_total{method=\"", LabelValue(method), "\"} ",
                    count, "\n");
  }
  return out;
}

std::string Metrics::RenderSpares(const std::vector<v1::JobStatus>& jobs) {
  std::string out;
  Header(out, "horovodd_spares_ready", "gauge",
         "Hot spares of each job that has not ended, started and waiting to take a place.");
  for (const v1::JobStatus& job : jobs) {
    if (Terminal(job.state()) || job.spec().hot_spares() == 0) continue;
    int ready = 0;
    for (const v1::WorkerStatus& w : job.workers()) ready += w.state() == v1::WORKER_SPARE_READY;
    absl::StrAppend(&out, "horovodd_spares_ready{job=\"", LabelValue(job.job_id()), "\"} ", ready,
                    "\n");
  }
  return out;
}

std::string Metrics::RenderRanks(const std::vector<v1::JobStatus>& jobs) {
  struct Rank {
    std::string labels;  // job="...",rank="..."
    const v1::WorkerActivity* activity;
    const v1::WorkerStatus* worker;
  };
  std::vector<Rank> ranks;
  for (const v1::JobStatus& job : jobs) {
    if (Terminal(job.state())) continue;
    for (const v1::WorkerStatus& w : job.workers()) {
      if (w.rank() < 0 || !w.has_activity()) continue;
      ranks.push_back(
          {absl::StrCat("job=\"", LabelValue(job.job_id()), "\",rank=\"", w.rank(), "\""),
           &w.activity(), &w});
    }
  }
  // One gauge per row, each with a sample per rank; counts print whole.
  struct Gauge {
    const char* name;
    const char* help;
    std::function<std::string(const Rank&)> value;
  };
  const Gauge gauges[] = {
      {"horovodd_rank_wait_seconds",
       "How long each rank has waited in its oldest pending collective (0: in none).",
       [](const Rank& r) {
         return Number(r.activity->has_waiting() ? r.activity->waiting().waited_seconds() : 0);
       }},
      {"horovodd_rank_step_seconds",
       "Each rank's step time: the mean interval between its recent commits (0: unknown).",
       [](const Rank& r) { return Number(r.activity->step_seconds()); }},
      {"horovodd_rank_collectives_completed",
       "Collectives each rank completed in its current generation.",
       [](const Rank& r) { return absl::StrCat(r.activity->completed()); }},
      {"horovodd_rank_last_commit", "Commits each rank's state has seen.",
       [](const Rank& r) { return absl::StrCat(r.activity->last_commit()); }},
      {"horovodd_rank_step_wait_seconds",
       "Of each rank's step, the mean time it had a collective pending.",
       [](const Rank& r) { return Number(r.activity->step_wait_seconds()); }},
      {"horovodd_rank_lost_seconds_per_step",
       "Time per step the job loses waiting for each rank: the other ranks' median wait per "
       "step less its own.",
       [](const Rank& r) { return Number(r.worker->lost_seconds_per_step()); }},
      {"horovodd_rank_straggler",
       "1 for a rank the daemon counts a straggler (the others wait for it), else 0.",
       [](const Rank& r) { return std::string(r.worker->straggler() ? "1" : "0"); }},
  };
  std::string out;
  for (const Gauge& gauge : gauges) {
    Header(out, gauge.name, "gauge", gauge.help);
    for (const Rank& r : ranks) {
      absl::StrAppend(&out, gauge.name, "{", r.labels, "} ", gauge.value(r), "\n");
    }
  }
  return out;
}

std::string Metrics::RenderGoodput(const std::vector<v1::JobStatus>& jobs) {
  std::string seconds;
  std::string ratio;
  Header(seconds, "horovodd_job_seconds", "gauge",
         "Where each job's wall time went, by part: training (on work that was kept), starting, "
         "waiting (for --min-np slots), detection, reset, replay (work a failure lost) and "
         "stall; the parts add up to its wall time.");
  Header(ratio, "horovodd_job_goodput", "gauge",
         "Each job's share of its wall time spent training on work that was kept.");
  for (const v1::JobStatus& job : jobs) {
    if (Terminal(job.state()) || !job.has_goodput()) continue;
    const v1::JobGoodput& g = job.goodput();
    const std::string id = LabelValue(job.job_id());
    for (const auto& [part, value] : {std::pair{"training", g.training_seconds()},
                                      {"starting", g.starting_seconds()},
                                      {"waiting", g.waiting_seconds()},
                                      {"detection", g.detection_seconds()},
                                      {"reset", g.reset_seconds()},
                                      {"replay", g.replay_seconds()},
                                      {"stall", g.stall_seconds()}}) {
      absl::StrAppend(&seconds, "horovodd_job_seconds{job=\"", id, "\",part=\"", part, "\"} ",
                      Number(value), "\n");
    }
    absl::StrAppend(&ratio, "horovodd_job_goodput{job=\"", id, "\"} ", Number(g.goodput()), "\n");
  }
  return seconds + ratio;
}

}  // namespace horovodd::daemon
