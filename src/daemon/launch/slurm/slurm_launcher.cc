#include "daemon/launch/slurm/slurm_launcher.h"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "discovery/script_runner.h"
#include "discovery/slurm_parser.h"

namespace horovodd::daemon {
namespace {

// How long the destructor waits for steps it killed to report their end.
constexpr absl::Duration kKillWait = absl::Seconds(15);
// How long a cancelled step of a killed srun may take to leave squeue, and how
// often squeue is asked meanwhile.
constexpr absl::Duration kStepGoneWait = absl::Seconds(20);
constexpr absl::Duration kStepPollInterval = absl::Milliseconds(250);

// srun exits 128+N when a signal N ended its task (Slurm's documented convention).
ExitInfo TaskExit(const ExitInfo& srun) {
  if (srun.signal == 0 && srun.exit_code > 128 && srun.exit_code < 128 + NSIG) {
    ExitInfo task;
    task.signal = srun.exit_code - 128;
    return task;
  }
  return srun;
}

// The PATH the worker's srun is looked up in: the worker's environment's.
std::string FindSrun(const LaunchSpec& spec) {
  auto path = spec.env.find("PATH");
  const std::string dirs =
      path != spec.env.end() ? path->second : (getenv("PATH") ? getenv("PATH") : "");
  for (absl::string_view dir : absl::StrSplit(dirs, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/srun");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

std::unique_ptr<SlurmLauncher> SlurmLauncher::Create(Launcher* srun_launcher,
                                                     SlurmLauncherOptions options) {
  HVDD_CHECK(srun_launcher != nullptr);
  if (!options.run) options.run = discovery::DefaultCommandRunner(options.command_timeout);
  return std::unique_ptr<SlurmLauncher>(new SlurmLauncher(srun_launcher, std::move(options)));
}

SlurmLauncher::SlurmLauncher(Launcher* srun_launcher, SlurmLauncherOptions options)
    : srun_launcher_(srun_launcher),
      options_(std::move(options)),
      control_([this] { ControlLoop(); }) {}

SlurmLauncher::~SlurmLauncher() {
  // Every srun's on_exit calls back into this object: none may be left.
  TerminateAll(absl::ZeroDuration());
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  control_.join();
}

absl::StatusOr<LaunchedProcess> SlurmLauncher::Launch(const WorkerLaunch& launch,
                                                      ProcessCallbacks callbacks) {
  const SlurmStepOptions* slurm = launch.route.options_as<SlurmStepOptions>();
  const std::string job_id = slurm != nullptr ? slurm->job_id : "";
  if (!discovery::IsValidSlurmJobId(job_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot start a Slurm step: '", job_id, "' is not a Slurm job id"));
  }
  const std::string srun = FindSrun(launch.spec);
  if (srun.empty()) {
    return absl::FailedPreconditionError(
        "srun is not in the workers' PATH: the Slurm launcher needs Slurm's client commands "
        "where the daemon runs");
  }
  absl::StatusOr<std::vector<discovery::SlurmNode>> nodes =
      discovery::ShowSlurmNodes(options_.run, launch.host);
  if (!nodes.ok()) {
    return absl::UnavailableError(
        absl::StrCat("Slurm node ", launch.host, ": ", nodes.status().message()));
  }
  if (nodes->size() != 1 || (*nodes)[0].name != launch.host) {
    return absl::UnavailableError(
        absl::StrCat("Slurm does not know one node named '", launch.host, "'"));
  }
  const discovery::SlurmNode& node = nodes->front();
  if (!discovery::SlurmNodeUsable(node.state)) {
    return absl::UnavailableError(absl::StrCat("Slurm node ", launch.host, " is ", node.state));
  }

  int64_t handle;
  {
    absl::MutexLock lock(&mu_);
    handle = next_handle_++;
  }
  Step step;
  step.job_id = job_id;
  step.name = absl::StrCat("hvdd.", getpid(), ".", handle);

  LaunchSpec spec;
  spec.env = launch.spec.env;
  if (!node.address.empty()) spec.env[kNodeAddressVariable] = node.address;
  spec.working_dir = launch.spec.working_dir;
  spec.argv = {srun,
               absl::StrCat("--jobid=", job_id),
               absl::StrCat("--nodelist=", launch.host),
               "--nodes=1",
               "--ntasks=1",
               "--overlap",  // beside the other workers' steps, on the allocation's CPUs
               "--cpu-bind=none",
               "--kill-on-bad-exit=0",
               "--quiet",
               absl::StrCat("--job-name=", step.name)};
  if (!launch.spec.working_dir.empty()) {
    spec.argv.push_back(absl::StrCat("--chdir=", launch.spec.working_dir));
  }
  spec.argv.insert(spec.argv.end(), launch.spec.argv.begin(), launch.spec.argv.end());

  ProcessCallbacks relay;
  relay.on_line = std::move(callbacks.on_line);
  relay.on_exit = [this, handle, on_exit = std::move(callbacks.on_exit)](const ExitInfo& exit) {
    OnSrunExit(handle, exit, on_exit);
  };
  // Registered before srun starts: its on_exit may come before Launch returns.
  {
    absl::MutexLock lock(&mu_);
    steps_[handle] = step;
  }
  WorkerLaunch srun_launch;
  srun_launch.host = "localhost";
  srun_launch.route.kind = LaunchRoute::kLocal;  // srun runs here, whatever the node
  srun_launch.spec = std::move(spec);
  absl::StatusOr<LaunchedProcess> started = srun_launcher_->Launch(srun_launch, std::move(relay));
  absl::MutexLock lock(&mu_);
  if (!started.ok()) {
    steps_.erase(handle);
    return started.status();
  }
  auto it = steps_.find(handle);
  if (it != steps_.end()) it->second.srun_handle = started->handle;
  return LaunchedProcess{handle, started->pid};
}

absl::Status SlurmLauncher::Signal(int64_t handle, int sig) {
  absl::MutexLock lock(&mu_);
  auto it = steps_.find(handle);
  if (it == steps_.end() || it->second.exited) return absl::NotFoundError("no such process");
  work_.push_back([this, handle, sig] { DeliverSignal(handle, sig); });
  return absl::OkStatus();
}

void SlurmLauncher::DeliverSignal(int64_t handle, int sig) {
  Step step;
  {
    absl::MutexLock lock(&mu_);
    auto it = steps_.find(handle);
    if (it == steps_.end() || it->second.exited) return;
    step = it->second;
  }
  const std::string id = FindStep(step.job_id, step.name);
  if (!id.empty()) {
    const char* name = sigabbrev_np(sig);
    const std::string signal = name != nullptr ? name : std::to_string(sig);
    // Slurm 22.05's scancel may exit non-zero ("Invalid job id specified") for
    // a step it did signal, so its status says nothing: the step's end does.
    options_.run({"scancel", "--quiet", absl::StrCat("--signal=", signal), id}).IgnoreError();
    return;
  }
  // No step yet (srun is still asking for one), or squeue did not answer: srun
  // gets the signal, and a SIGKILL of srun is cleaned up in OnSrunExit.
  if (step.srun_handle != 0) srun_launcher_->Signal(step.srun_handle, sig).IgnoreError();
}

std::string SlurmLauncher::FindStep(const std::string& job_id, const std::string& name) {
  absl::StatusOr<std::string> out =
      options_.run({"squeue", "--noheader", "--steps", "--jobs", job_id, "--format", "%i %j"});
  if (!out.ok()) return "";
  for (absl::string_view line : absl::StrSplit(*out, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.size() == 2 && words[1] == name) return std::string(words[0]);
  }
  return "";
}

void SlurmLauncher::OnSrunExit(int64_t handle, const ExitInfo& exit,
                               const std::function<void(const ExitInfo&)>& on_exit) {
  Step step;
  {
    absl::MutexLock lock(&mu_);
    auto it = steps_.find(handle);
    HVDD_CHECK(it != steps_.end());
    it->second.exited = true;
    step = it->second;
  }
  auto finish = [this, handle, on_exit, task = TaskExit(exit)] {
    if (on_exit) on_exit(task);
    absl::MutexLock lock(&mu_);
    steps_.erase(handle);
  };
  if (exit.signal == 0) {
    finish();  // srun saw its step to the end
    return;
  }
  // srun was killed: its step may still run. Cancel it (on the control
  // thread, not this I/O thread) before anyone hears the worker ended.
  Post([this, step, finish] {
    std::string id = FindStep(step.job_id, step.name);
    if (!id.empty()) options_.run({"scancel", "--quiet", "--signal=KILL", id}).IgnoreError();
    // Slurm takes a few seconds to retire a step whose srun is gone: wait
    // (bounded) until squeue no longer lists it, so that the worker's end
    // means its step's end.
    const absl::Time deadline = absl::Now() + kStepGoneWait;
    while (!id.empty() && absl::Now() < deadline) {
      absl::SleepFor(kStepPollInterval);
      id = FindStep(step.job_id, step.name);
    }
    finish();
  });
}

void SlurmLauncher::Post(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  work_.push_back(std::move(work));
}

bool SlurmLauncher::HasWorkOrQuits() const { return quit_ || !work_.empty(); }

void SlurmLauncher::ControlLoop() {
  while (true) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &SlurmLauncher::HasWorkOrQuits));
      if (work_.empty()) return;  // quit, with nothing left to do
      work = std::move(work_.front());
      work_.pop_front();
    }
    work();
  }
}

bool SlurmLauncher::AwaitFinished(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](std::map<int64_t, Step>* steps) { return steps->empty(); }, &steps_),
      timeout);
}

void SlurmLauncher::TerminateAll(absl::Duration grace) {
  std::vector<int64_t> handles;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [handle, step] : steps_) handles.push_back(handle);
  }
  if (handles.empty()) return;
  if (grace > absl::ZeroDuration()) {
    for (int64_t handle : handles) Signal(handle, SIGTERM).IgnoreError();
    if (AwaitFinished(grace)) return;
  }
  for (int64_t handle : handles) Signal(handle, SIGKILL).IgnoreError();
  if (AwaitFinished(kKillWait)) return;
  // slurmctld did not help: srun goes, and OnSrunExit tries the step once more.
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [handle, step] : steps_) {
      if (!step.exited && step.srun_handle != 0) {
        srun_launcher_->Signal(step.srun_handle, SIGKILL).IgnoreError();
      }
    }
  }
  AwaitFinished(kKillWait);
}

bool SlurmLauncher::DetachAll() {
  if (!srun_launcher_->DetachAll()) return false;
  absl::MutexLock lock(&mu_);
  steps_.clear();
  work_.clear();
  return true;
}

size_t SlurmLauncher::running() const {
  absl::MutexLock lock(&mu_);
  return steps_.size();
}

}  // namespace horovodd::daemon
