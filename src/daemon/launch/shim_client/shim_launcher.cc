#include "daemon/launch/shim_client/shim_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/launch/shim_client/shim_launcher_internal.h"
#include "daemon/launch/spawn_process.h"
#include "daemon/shim_protocol/shim_protocol.h"
#include "shim.pb.h"

namespace horovodd::daemon {
namespace {

namespace sv1 = horovodd::shim::v1;
using horovodd::shim::EncodeFrame;
using horovodd::shim::FrameReader;
using horovodd::shim::ReadMessage;
using horovodd::shim::WriteAll;

ExitInfo FromProto(const sv1::ExitStatus& status) {
  ExitInfo exit;
  exit.exit_code = status.exit_code();
  exit.signal = status.signal();
  exit.core_dumped = status.core_dumped();
  return exit;
}

// The last non-empty line of the shim's log, to say why it did not start.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShimLauncher>> ShimLauncher::Create(ShimLauncherOptions options) {
  if (access(options.shim_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot run the shim '", options.shim_binary, "': ", strerror(errno)));
  }
  std::error_code error;
  std::filesystem::create_directories(options.socket_dir, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create the shim socket dir ",
                                                   options.socket_dir, ": ", error.message()));
  }
  chmod(options.socket_dir.c_str(), 0700);
  HVDD_RETURN_IF_ERROR(horovodd::shim::CheckSocketPath(
      (std::filesystem::path(options.socket_dir) / "job-0000000000.sock").string()));
  if (options.remote_shim_binary.empty()) options.remote_shim_binary = options.shim_binary;
  if (options.remote_namespace.empty()) {
    options.remote_namespace = ShimNamespaceOf(std::filesystem::absolute(options.socket_dir));
  }
  return std::unique_ptr<ShimLauncher>(new ShimLauncher(std::move(options)));
}

ShimLauncher::~ShimLauncher() { DetachAll(); }

std::string ShimLauncher::SocketPath(const std::string& job_id) const {
  return (std::filesystem::path(options_.socket_dir) / (job_id + ".sock")).string();
}

absl::Status ShimLauncher::StartShim(const std::string& job_id) {
  const std::string log_path =
      (std::filesystem::path(options_.socket_dir) / (job_id + ".log")).string();
  LaunchSpec spec;
  spec.argv = {options_.shim_binary,
               "--job",
               job_id,
               "--socket",
               SocketPath(job_id),
               "--log",
               log_path,
               "--idle-timeout-s",
               absl::StrCat(absl::ToDoubleSeconds(options_.shim_idle_timeout))};
  if (options_.shim_buffered_lines > 0) {
    spec.argv.push_back("--buffered-lines");
    spec.argv.push_back(absl::StrCat(options_.shim_buffered_lines));
  }
  if (const char* path = getenv("PATH")) spec.env["PATH"] = path;
  HVDD_ASSIGN_OR_RETURN(ExecPlan plan, ExecPlan::Create(spec));
  UniqueFd null(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null.valid()) return absl::InternalError("cannot open /dev/null");
  HVDD_ASSIGN_OR_RETURN(UniqueFd stdio, MoveAboveStdio(std::move(null)));
  HVDD_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(plan, {stdio.get(), stdio.get(), stdio.get()}));
  // The shim detaches and this first process exits: 0 once its socket listens.
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat("horovodd-shim for job ", job_id, " did not start: ",
                                               LastLine(log_path), " (log ", log_path, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ShimLauncher::Shim>> ShimLauncher::Connect(const std::string& job_id,
                                                                          bool start) {
  const std::string path = SocketPath(job_id);
  absl::StatusOr<int> fd = horovodd::shim::ConnectUnix(path);
  if (!fd.ok() && start) {
    HVDD_RETURN_IF_ERROR(StartShim(job_id));
    fd = horovodd::shim::ConnectUnix(path);
  }
  if (!fd.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no shim answers for job ", job_id, ": ", fd.status().message()));
  }
  auto shim = std::make_shared<Shim>();
  shim->key = {job_id, ""};
  shim->fd.Reset(*fd);
  HVDD_RETURN_IF_ERROR(shim->SendHello());
  return shim;
}

absl::StatusOr<sv1::ShimEvent> ShimLauncher::Handshake(Shim& shim) {
  SetReceiveTimeout(shim.fd.get(), kHandshakeTimeout);
  sv1::ShimEvent event;
  HVDD_RETURN_IF_ERROR(ReadMessage(shim.fd.get(), shim.frames, event));
  SetReceiveTimeout(shim.fd.get(), absl::ZeroDuration());
  const std::string& job_id = shim.key.first;
  if (event.has_refused()) {
    return absl::FailedPreconditionError(absl::StrCat("the shim of job ", job_id, shim.where(),
                                                      " refused: ", event.refused().message()));
  }
  if (!event.has_welcome()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the shim of job ", job_id, shim.where(), " did not answer its Hello"));
  }
  return event;
}

absl::StatusOr<std::shared_ptr<ShimLauncher::Shim>> ShimLauncher::ShimFor(
    const ShimKey& key, const WorkerLaunch& launch) {
  {
    absl::MutexLock lock(&mu_);
    auto it = shims_.find(key);
    if (it != shims_.end()) return it->second;
  }
  absl::MutexLock start(&start_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto it = shims_.find(key);
    if (it != shims_.end()) return it->second;
  }
  absl::StatusOr<std::shared_ptr<Shim>> connected;
  if (key.second.empty()) {
    connected = Connect(key.first, /*start=*/true);
  } else {
    auto daemon = launch.spec.env.find(kDaemonAddressVariable);
    connected = ConnectRemote(key, SshOptionsIn(launch.route), /*start=*/true,
                              daemon == launch.spec.env.end() ? "" : daemon->second);
  }
  HVDD_ASSIGN_OR_RETURN(std::shared_ptr<Shim> shim, std::move(connected));
  HVDD_ASSIGN_OR_RETURN(sv1::ShimEvent welcome, Handshake(*shim));
  shim->pid = welcome.welcome().shim_pid();
  {
    absl::MutexLock lock(&mu_);
    shims_[key] = shim;
  }
  shim->reader = std::thread([this, shim] { ReadLoop(shim); });
  return shim;
}

absl::StatusOr<LaunchedProcess> ShimLauncher::Launch(const WorkerLaunch& launch,
                                                     ProcessCallbacks callbacks) {
  // Checked here, so the shim never sees a spec it cannot exec.
  HVDD_RETURN_IF_ERROR(ExecPlan::Create(launch.spec).status());
  auto find = [&](const char* name) {
    auto it = launch.spec.env.find(name);
    return it == launch.spec.env.end() ? std::string() : it->second;
  };
  std::string job_id = find("HOROVODD_JOB_ID");
  if (job_id.empty()) job_id = "unnamed";
  int64_t worker_id = 0;
  int64_t handle = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!absl::SimpleAtoi(find("HOROVODD_WORKER_ID"), &worker_id) || worker_id <= 0) {
      worker_id = next_unnamed_worker_++;
    }
    handle = next_handle_++;
  }
  if (job_id.find('/') != std::string::npos || job_id == "." || job_id == "..") {
    return absl::InvalidArgumentError(absl::StrCat("job id '", job_id, "' cannot name a socket"));
  }
  const bool remote = launch.route.kind == LaunchRoute::kByHost && !launch.host.empty() &&
                      !IsLocalHost(launch.host);
  const ShimKey key{job_id, remote ? launch.host : std::string()};
  HVDD_ASSIGN_OR_RETURN(std::shared_ptr<Shim> shim, ShimFor(key, launch));
  {
    absl::MutexLock lock(&shim->mu);
    if (shim->gone) return absl::UnavailableError("the shim of job " + job_id + " is gone");
    Shim::Pending& pending = shim->pending[worker_id];
    pending.callbacks = std::make_shared<ProcessCallbacks>(std::move(callbacks));
    pending.handle = handle;
  }
  sv1::ShimRequest request;
  sv1::Launch* message = request.mutable_launch();
  message->set_worker_id(worker_id);
  for (const std::string& arg : launch.spec.argv) message->add_argv(arg);
  for (const auto& [k, v] : launch.spec.env) (*message->mutable_env())[k] = v;
  if (!shim->workers_daemon_address.empty()) {
    // The worker dials its end of the shim link's tunnel, on its own host.
    (*message->mutable_env())[kDaemonAddressVariable] = shim->workers_daemon_address;
  }
  message->set_working_dir(launch.spec.working_dir);
  absl::Status sent = shim->Send(request);
  absl::MutexLock lock(&shim->mu);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shim->mu) {
    auto it = shim->pending.find(worker_id);
    return it == shim->pending.end() || it->second.done || shim->gone;
  };
  if (sent.ok()) shim->mu.AwaitWithTimeout(absl::Condition(&done), options_.launch_timeout);
  auto it = shim->pending.find(worker_id);
  absl::Status status = sent;
  int pid = 0;
  if (it == shim->pending.end() || !it->second.done) {
    if (status.ok() && shim->gone) {
      status = absl::UnavailableError(
          absl::StrCat("the shim of job ", job_id, " ended before it started the worker"));
    } else if (status.ok()) {
      status = absl::UnavailableError(absl::StrCat("the shim of job ", job_id,
                                                   " did not answer a launch in ",
                                                   absl::FormatDuration(options_.launch_timeout)));
    }
  } else {
    status = it->second.status;
    pid = it->second.pid;
  }
  if (it != shim->pending.end()) shim->pending.erase(it);
  if (!status.ok()) return status;
  {
    absl::MutexLock handles(&mu_);
    handles_[handle] = {key, worker_id};
  }
  return LaunchedProcess{handle, pid};
}

absl::StatusOr<ShimContents> ShimLauncher::Reattach(const std::string& job_id,
                                                    const std::vector<RemoteShimHost>& remote_hosts,
                                                    const std::string& daemon_address) {
  absl::MutexLock start(&start_mu_);
  std::vector<absl::StatusOr<ShimContents>> found;
  found.push_back(ReattachOne({job_id, ""}, nullptr, daemon_address));
  for (const RemoteShimHost& remote : remote_hosts) {
    const ShimKey key{job_id, remote.host};
    absl::StatusOr<std::shared_ptr<Shim>> shim =
        ConnectRemote(key, remote.ssh, /*start=*/false, daemon_address);
    found.push_back(shim.ok() ? ReattachOne(key, *std::move(shim), daemon_address)
                              : absl::StatusOr<ShimContents>(shim.status()));
  }
  return MergeShimContents(std::move(found), /*local_expected=*/remote_hosts.empty());
}

absl::StatusOr<ShimContents> ShimLauncher::ReattachOne(const ShimKey& key,
                                                       std::shared_ptr<Shim> shim,
                                                       const std::string& daemon_address) {
  const std::string& job_id = key.first;
  {
    absl::MutexLock lock(&mu_);
    if (shims_.count(key) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is attached already"));
    }
  }
  if (shim == nullptr) {
    HVDD_ASSIGN_OR_RETURN(shim, Connect(job_id, /*start=*/false));
  }
  HVDD_ASSIGN_OR_RETURN(sv1::ShimEvent event, Handshake(*shim));
  const sv1::Welcome& welcome = event.welcome();
  if (welcome.protocol_version() < horovodd::shim::kOldestProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the shim of job ", job_id, shim->where(), " speaks protocol ", welcome.protocol_version(),
        ", older than this daemon's oldest, ", horovodd::shim::kOldestProtocolVersion));
  }
  shim->pid = welcome.shim_pid();
  ShimContents contents;
  contents.worker_token = welcome.worker_token();
  contents.daemon_away = absl::Seconds(welcome.daemon_away_seconds());
  contents.protocol_version = welcome.protocol_version();
  if (shim->link != nullptr) {
    if (absl::Status tunnel = ReopenTunnel(*shim, welcome.daemon_address(), daemon_address);
        !tunnel.ok()) {
      contents.warnings.push_back(std::string(tunnel.message()));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    absl::MutexLock shim_lock(&shim->mu);
    for (const sv1::WorkerState& state : welcome.workers()) {
      const int64_t handle = next_handle_++;
      handles_[handle] = {key, state.worker_id()};
      Shim::Entry& entry = shim->workers[state.worker_id()];
      entry.handle = handle;
      entry.pid = state.pid();
      contents.workers.push_back(
          {state.worker_id(), LaunchedProcess{handle, state.pid()}, state.exited()});
    }
    shims_[key] = shim;
  }
  return contents;
}

std::vector<std::shared_ptr<ShimLauncher::Shim>> ShimLauncher::ShimsOf(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Shim>> shims;
  for (const auto& [key, shim] : shims_) {
    if (key.first == job_id) shims.push_back(shim);
  }
  return shims;
}

void ShimLauncher::Adopt(const std::string& job_id,
                         const std::function<ProcessCallbacks(int64_t)>& callbacks_for) {
  for (const std::shared_ptr<Shim>& shim : ShimsOf(job_id)) {
    if (shim->reader.joinable()) continue;  // adopted already
    {
      absl::MutexLock lock(&shim->mu);
      for (auto& [id, entry] : shim->workers) {
        entry.callbacks = std::make_shared<ProcessCallbacks>(callbacks_for(id));
      }
    }
    shim->reader = std::thread([this, shim] { ReadLoop(shim); });
  }
}

absl::Status ShimLauncher::Signal(int64_t handle, int sig) {
  std::shared_ptr<Shim> shim;
  int64_t worker_id = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = handles_.find(handle);
    if (it == handles_.end()) return absl::NotFoundError("no such process");
    worker_id = it->second.second;
    auto s = shims_.find(it->second.first);
    if (s == shims_.end()) return absl::NotFoundError("no such process");
    shim = s->second;
  }
  {
    absl::MutexLock lock(&shim->mu);
    auto it = shim->workers.find(worker_id);
    if (it == shim->workers.end() || it->second.exited) {
      return absl::NotFoundError("the process ended");
    }
  }
  sv1::ShimRequest request;
  request.mutable_signal()->set_worker_id(worker_id);
  request.mutable_signal()->set_signal(sig);
  return shim->Send(request);
}

void ShimLauncher::ReadLoop(std::shared_ptr<Shim> shim) {
  while (true) {
    sv1::ShimEvent event;
    absl::Status read = ReadMessage(shim->fd.get(), shim->frames, event);
    if (!read.ok()) break;
    if (event.has_launched()) {
      const sv1::Launched& launched = event.launched();
      absl::MutexLock lock(&shim->mu);
      auto it = shim->pending.find(launched.worker_id());
      if (it == shim->pending.end()) continue;
      Shim::Pending& pending = it->second;
      pending.done = true;
      if (launched.error_code() != 0) {
        pending.status = absl::Status(static_cast<absl::StatusCode>(launched.error_code()),
                                      launched.error_message());
      } else {
        pending.pid = launched.pid();
        // Registered before any of its output is read.
        Shim::Entry& entry = shim->workers[launched.worker_id()];
        entry.handle = pending.handle;
        entry.pid = launched.pid();
        entry.callbacks = pending.callbacks;
      }
      continue;
    }
    if (event.has_output()) {
      const sv1::Output& output = event.output();
      std::shared_ptr<ProcessCallbacks> callbacks;
      {
        absl::MutexLock lock(&shim->mu);
        auto it = shim->workers.find(output.worker_id());
        if (it != shim->workers.end()) callbacks = it->second.callbacks;
      }
      if (!callbacks || !callbacks->on_line) continue;
      if (output.dropped_before() > 0) {
        callbacks->on_line(OutputStream::kStderr,
                           absl::StrCat("[horovodd-shim: ", output.dropped_before(),
                                        " line(s) of output dropped while no daemon read them]"));
      }
      callbacks->on_line(output.stderr() ? OutputStream::kStderr : OutputStream::kStdout,
                         output.line());
      continue;
    }
    if (event.has_exited()) {
      const int64_t worker_id = event.exited().worker_id();
      std::shared_ptr<ProcessCallbacks> callbacks;
      {
        absl::MutexLock lock(&shim->mu);
        auto it = shim->workers.find(worker_id);
        if (it == shim->workers.end() || it->second.exited) continue;
        it->second.exited = true;
        callbacks = it->second.callbacks;
      }
      NoteExit();
      if (callbacks && callbacks->on_exit) callbacks->on_exit(FromProto(event.exited().status()));
      sv1::ShimRequest release;
      release.mutable_release()->set_worker_id(worker_id);
      shim->Send(release).IgnoreError();
    }
  }
  // The connection ended: either we are detaching, or the shim is gone and
  // its workers with it (they die with their shim).
  std::vector<std::shared_ptr<ProcessCallbacks>> lost;
  {
    absl::MutexLock lock(&shim->mu);
    shim->gone = true;
    if (!shim->detaching) {
      for (auto& [id, entry] : shim->workers) {
        if (!entry.exited) {
          entry.exited = true;
          lost.push_back(entry.callbacks);
        }
      }
    }
  }
  if (!lost.empty()) NoteExit();
  for (const auto& callbacks : lost) {
    ExitInfo exit;
    exit.exit_code = -1;  // the status was lost with the shim
    if (callbacks && callbacks->on_exit) callbacks->on_exit(exit);
  }
  // Nothing more is read or sent: the shim sees its daemon leave.
  shutdown(shim->fd.get(), SHUT_RDWR);
  DropShim(shim);
}

void ShimLauncher::Close(const std::string& job_id) {
  for (const std::shared_ptr<Shim>& shim : ShimsOf(job_id)) {
    {
      absl::MutexLock lock(&shim->mu);
      shim->detaching = true;
    }
    // As in DetachAll: a Release on its way still goes out; the reader then
    // ends, closes the connection and retires the shim.
    shutdown(shim->fd.get(), SHUT_RD);
  }
}

void ShimLauncher::DropShim(const std::shared_ptr<Shim>& shim) {
  absl::MutexLock lock(&mu_);
  auto it = shims_.find(shim->key);
  if (it != shims_.end() && it->second == shim) shims_.erase(it);
  retired_.push_back(shim);  // its reader thread (this one) is joined by DetachAll
}

int ShimLauncher::ShimPid(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = shims_.find(ShimKey{job_id, ""});
  return it == shims_.end() ? 0 : it->second->pid;
}

size_t ShimLauncher::running() const {
  std::vector<std::shared_ptr<Shim>> shims;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [job, shim] : shims_) shims.push_back(shim);
  }
  size_t count = 0;
  for (const auto& shim : shims) {
    absl::MutexLock lock(&shim->mu);
    for (const auto& [id, entry] : shim->workers) count += entry.exited ? 0 : 1;
  }
  return count;
}

void ShimLauncher::TerminateAll(absl::Duration grace) {
  std::vector<int64_t> handles;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [handle, ids] : handles_) handles.push_back(handle);
  }
  for (int64_t handle : handles) Signal(handle, SIGTERM).IgnoreError();
  if (AwaitNoneRunning(absl::Now() + grace)) return;
  for (int64_t handle : handles) Signal(handle, SIGKILL).IgnoreError();
  AwaitNoneRunning(absl::Now() + absl::Seconds(5));
}

void ShimLauncher::NoteExit() {
  absl::MutexLock lock(&exits_mu_);
  exited_.SignalAll();
}

bool ShimLauncher::AwaitNoneRunning(absl::Time deadline) {
  absl::MutexLock lock(&exits_mu_);
  while (running() > 0) {
    if (exited_.WaitWithDeadline(&exits_mu_, deadline)) return running() == 0;  // timed out
  }
  return true;
}

bool ShimLauncher::DetachAll() {
  std::vector<std::shared_ptr<Shim>> shims;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [job, shim] : shims_) shims.push_back(shim);
    for (const auto& shim : retired_) shims.push_back(shim);
    retired_.clear();
  }
  for (const auto& shim : shims) {
    {
      absl::MutexLock lock(&shim->mu);
      shim->detaching = true;
    }
    // The read side only: a Release the reader is about to send still goes
    // out, so the shim does not keep that exit status for a daemon.
    shutdown(shim->fd.get(), SHUT_RD);
  }
  for (const auto& shim : shims) {
    if (shim->reader.joinable()) shim->reader.join();
    shutdown(shim->fd.get(), SHUT_RDWR);
  }
  return true;
}

}  // namespace horovodd::daemon
