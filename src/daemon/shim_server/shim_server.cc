#include "daemon/shim_server/shim_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace horovodd::shim {
namespace {

// Encoded bytes handed to the socket at a time; the rest waits in queued_,
// where output can still be dropped oldest-first if the daemon is slow.
constexpr size_t kWireHighWater = 1 << 20;

v1::ExitStatus ToProto(const daemon::ExitInfo& exit) {
  v1::ExitStatus status;
  status.set_exit_code(exit.exit_code);
  status.set_signal(exit.signal);
  status.set_core_dumped(exit.core_dumped);
  return status;
}

v1::ShimEvent ExitedEvent(int64_t worker_id, const v1::ExitStatus& status) {
  v1::ShimEvent event;
  event.mutable_exited()->set_worker_id(worker_id);
  *event.mutable_exited()->mutable_status() = status;
  return event;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShimServer>> ShimServer::Create(ShimServerOptions options,
                                                               UniqueFd listener,
                                                               UniqueFd signals) {
  if (!listener.valid()) return absl::InvalidArgumentError("shim: no listening socket");
  if (fcntl(listener.get(), F_SETFL, O_NONBLOCK) != 0) {
    return absl::InternalError(
        absl::StrCat("shim: cannot make the listener non-blocking: ", strerror(errno)));
  }
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) {
    return absl::InternalError(absl::StrCat("shim: cannot create an eventfd: ", strerror(errno)));
  }
  HVDD_ASSIGN_OR_RETURN(auto launcher, daemon::LocalLauncher::Create());
  return std::unique_ptr<ShimServer>(new ShimServer(std::move(options), std::move(listener),
                                                    std::move(signals), std::move(wake),
                                                    std::move(launcher)));
}

ShimServer::ShimServer(ShimServerOptions options, UniqueFd listener, UniqueFd signals,
                       UniqueFd wake, std::unique_ptr<daemon::LocalLauncher> launcher)
    : options_(std::move(options)),
      listener_(std::move(listener)),
      signals_(std::move(signals)),
      wake_(std::move(wake)),
      idle_since_(absl::Now()),
      launcher_(std::move(launcher)) {}

ShimServer::~ShimServer() { launcher_.reset(); }

void ShimServer::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_.get(), &one, sizeof(one));
}

void ShimServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
  }
  Wake();
}

void ShimServer::SignalAll(int sig) {
  std::vector<pid_t> pids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, w] : workers_) {
      if (!w.exited && w.pid > 0) pids.push_back(w.pid);
    }
  }
  for (pid_t pid : pids) launcher_->Signal(pid, sig).IgnoreError();
}

// ---------------------------------------------------------------- launcher thread

void ShimServer::QueueLocked(v1::ShimEvent event) {
  if (event.has_output()) {
    const size_t bytes = event.output().line().size();
    // Oldest output first; exit events are never dropped.
    while (!queued_.empty() && (queued_output_lines_ + 1 > options_.max_buffered_lines ||
                                queued_output_bytes_ + bytes > options_.max_buffered_bytes)) {
      auto it = queued_.begin();
      while (it != queued_.end() && !it->has_output()) ++it;
      if (it == queued_.end()) break;
      queued_output_lines_ -= 1;
      queued_output_bytes_ -= it->output().line().size();
      dropped_total_ += 1;
      const uint64_t dropped = 1 + it->output().dropped_before();
      it = queued_.erase(it);
      // The count moves to the next line kept, so the daemon hears of the
      // gap where it is: before the oldest line it still gets.
      while (it != queued_.end() && !it->has_output()) ++it;
      if (it != queued_.end()) {
        it->mutable_output()->set_dropped_before(it->output().dropped_before() + dropped);
      } else {
        dropped_pending_ += dropped;
      }
    }
    event.mutable_output()->set_dropped_before(event.output().dropped_before() + dropped_pending_);
    dropped_pending_ = 0;
    queued_output_lines_ += 1;
    queued_output_bytes_ += bytes;
  }
  queued_.push_back(std::move(event));
}

void ShimServer::OnLine(int64_t worker_id, daemon::OutputStream stream, std::string_view line) {
  v1::ShimEvent event;
  v1::Output* output = event.mutable_output();
  output->set_worker_id(worker_id);
  output->set_stderr(stream == daemon::OutputStream::kStderr);
  output->set_line(std::string(line));
  {
    absl::MutexLock lock(&mu_);
    QueueLocked(std::move(event));
  }
  Wake();
}

void ShimServer::OnExit(int64_t worker_id, const daemon::ExitInfo& exit) {
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(worker_id);
    if (it == workers_.end()) return;
    it->second.exited = true;
    it->second.status = ToProto(exit);
    // Without a daemon the Exited event is made at the next Hello instead,
    // after the buffered output, from workers_.
    if (connected_) QueueLocked(ExitedEvent(worker_id, it->second.status));
  }
  Wake();
}

// ---------------------------------------------------------------- Run()'s thread

void ShimServer::Run() {
  while (true) {
    const absl::Time now = absl::Now();
    if (ShouldEnd(now)) return;
    MoveQueuedToWire();

    std::vector<pollfd> fds;
    fds.push_back({listener_.get(), POLLIN, 0});
    fds.push_back({wake_.get(), POLLIN, 0});
    if (signals_.valid()) fds.push_back({signals_.get(), POLLIN, 0});
    const size_t candidate_index = fds.size();
    if (candidate_.valid()) fds.push_back({candidate_.get(), POLLIN, 0});
    const size_t daemon_index = fds.size();
    if (daemon_.valid()) {
      fds.push_back({daemon_.get(), static_cast<short>(POLLIN | (wire_.empty() ? 0 : POLLOUT)), 0});
    }
    // Wake at least once a second to check the idle deadline.
    const int ready = poll(fds.data(), fds.size(), 1000);
    if (ready < 0) {
      if (errno == EINTR) continue;
      const char* why = strerror(errno);
      HVDD_LOG(ERROR) << "poll failed: " << why;
      return;
    }
    if (fds[1].revents != 0) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = read(wake_.get(), &count, sizeof(count));
    }
    if (signals_.valid() && fds[2].revents != 0) HandleSignals();
    if (daemon_.valid() && daemon_index < fds.size()) {
      const short revents = fds[daemon_index].revents;
      if (revents & (POLLIN | POLLHUP | POLLERR)) ReadFromDaemon();
      if (daemon_.valid() && (revents & POLLOUT)) FlushWire();
    }
    if (candidate_.valid() && candidate_index < daemon_index &&
        (fds[candidate_index].revents & (POLLIN | POLLHUP | POLLERR))) {
      ReadFromCandidate();
    }
    if (fds[0].revents & POLLIN) Accept();
  }
}

bool ShimServer::ShouldEnd(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (stop_requested_) return true;
  for (const auto& [id, w] : workers_) {
    if (!w.exited) return false;
  }
  if (greeted_ || candidate_.valid()) return false;  // a daemon is here, or saying Hello
  if (had_daemon_ && workers_.empty()) {
    HVDD_LOG(INFO) << "no worker left and every exit status delivered: ending";
    return true;
  }
  if (now - idle_since_ >= options_.idle_timeout) {
    HVDD_LOG(INFO) << "no worker running and no daemon for "
                   << absl::FormatDuration(options_.idle_timeout) << ": ending with "
                   << workers_.size() << " exit status(es) undelivered";
    return true;
  }
  return false;
}

void ShimServer::Accept() {
  const int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  // A newer candidate replaces one that has not said Hello yet; the daemon
  // in place is replaced only once the candidate's Hello is accepted.
  candidate_.Reset(fd);
  candidate_reader_ = FrameReader();
}

void ShimServer::Disconnect(const char* why) {
  if (greeted_) HVDD_LOG(INFO) << "daemon left (" << why << ")";
  daemon_.Reset();
  greeted_ = false;
  wire_.clear();
  idle_since_ = absl::Now();
  absl::MutexLock lock(&mu_);
  connected_ = false;
  // Exited events are made again for the next daemon from workers_.
  for (auto it = queued_.begin(); it != queued_.end();) {
    it = it->has_exited() ? queued_.erase(it) : it + 1;
  }
}

// Reads what `fd` has now into `reader`; false at EOF or on an error.
bool ShimServer::ReadAvailable(int fd, FrameReader& reader) {
  char chunk[64 * 1024];
  while (true) {
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    if (n == 0) return false;
    reader.Append(chunk, static_cast<size_t>(n));
  }
}

void ShimServer::ReadFromCandidate() {
  const bool open = ReadAvailable(candidate_.get(), candidate_reader_);
  absl::StatusOr<std::optional<std::string>> frame = candidate_reader_.Next();
  if (frame.ok() && !frame->has_value()) {
    if (!open) candidate_.Reset();
    return;  // the Hello is not whole yet
  }
  v1::ShimRequest request;
  std::string refusal;
  if (!frame.ok() || !request.ParseFromString(**frame) || !request.has_hello()) {
    refusal = "the first message must be a Hello";
  } else if (request.hello().protocol_version() < kOldestProtocolVersion) {
    refusal = absl::StrCat("protocol version ", request.hello().protocol_version(),
                           " is older than this shim's oldest, ", kOldestProtocolVersion);
  } else if (request.hello().job_id() != options_.job_id) {
    refusal = absl::StrCat("this shim supervises job ", options_.job_id, ", not ",
                           request.hello().job_id());
  }
  if (!refusal.empty()) {
    v1::ShimEvent refused;
    refused.mutable_refused()->set_message(refusal);
    const std::string bytes = EncodeFrame(refused);
    [[maybe_unused]] ssize_t n =
        send(candidate_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    HVDD_LOG(WARNING) << "refused a client: " << refusal;
    candidate_.Reset();
    return;
  }
  // The newest daemon wins: the one in place is gone or being replaced.
  if (daemon_.valid()) Disconnect("a new daemon connected");
  daemon_ = std::move(candidate_);
  reader_ = std::move(candidate_reader_);
  candidate_reader_ = FrameReader();
  Greet(request.hello());
  HandleFrames();
}

void ShimServer::ReadFromDaemon() {
  if (!ReadAvailable(daemon_.get(), reader_)) {
    HandleFrames();  // what came before the end still counts
    if (daemon_.valid()) Disconnect("connection closed");
    return;
  }
  HandleFrames();
}

void ShimServer::HandleFrames() {
  while (daemon_.valid()) {
    absl::StatusOr<std::optional<std::string>> frame = reader_.Next();
    if (!frame.ok()) {
      Disconnect(std::string(frame.status().message()).c_str());
      return;
    }
    if (!frame->has_value()) return;
    v1::ShimRequest request;
    if (!request.ParseFromString(**frame)) {
      Disconnect("malformed message");
      return;
    }
    Handle(request);
  }
}

void ShimServer::Handle(const v1::ShimRequest& request) {
  switch (request.kind_case()) {
    case v1::ShimRequest::kLaunch:
      HandleLaunch(request.launch());
      break;
    case v1::ShimRequest::kSignal: {
      pid_t pid = 0;
      {
        absl::MutexLock lock(&mu_);
        auto it = workers_.find(request.signal().worker_id());
        if (it != workers_.end() && !it->second.exited) pid = it->second.pid;
      }
      if (pid > 0) launcher_->Signal(pid, request.signal().signal()).IgnoreError();
      break;
    }
    case v1::ShimRequest::kRelease: {
      absl::MutexLock lock(&mu_);
      auto it = workers_.find(request.release().worker_id());
      if (it != workers_.end() && it->second.exited) workers_.erase(it);
      break;
    }
    default:
      break;  // a second Hello, or a newer daemon's request this shim does not know
  }
}

void ShimServer::Greet(const v1::Hello& hello) {
  v1::ShimEvent event;
  v1::Welcome* welcome = event.mutable_welcome();
  welcome->set_protocol_version(kProtocolVersion);
  welcome->set_job_id(options_.job_id);
  welcome->set_shim_pid(getpid());
  welcome->set_worker_token(worker_token_);
  welcome->set_daemon_address(daemon_address_);
  if (had_daemon_) {
    welcome->set_daemon_away_seconds(absl::ToDoubleSeconds(absl::Now() - idle_since_));
  }
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, w] : workers_) {
      v1::WorkerState* state = welcome->add_workers();
      state->set_worker_id(id);
      state->set_pid(w.pid);
      state->set_exited(w.exited);
      if (w.exited) *state->mutable_status() = w.status;
    }
    welcome->set_dropped_lines(dropped_total_);
    // After the output kept so far, so each worker's lines come before its exit.
    for (const auto& [id, w] : workers_) {
      if (w.exited) QueueLocked(ExitedEvent(id, w.status));
    }
    connected_ = true;
  }
  greeted_ = true;
  had_daemon_ = true;
  // The Welcome goes first, before any queued output.
  wire_ = EncodeFrame(event) + wire_;
  HVDD_LOG(INFO) << "daemon connected (protocol " << hello.protocol_version() << ")";
}

void ShimServer::HandleLaunch(const v1::Launch& launch) {
  const int64_t id = launch.worker_id();
  v1::ShimEvent event;
  v1::Launched* launched = event.mutable_launched();
  launched->set_worker_id(id);
  {
    absl::MutexLock lock(&mu_);
    if (!workers_.emplace(id, Worker{}).second) {
      launched->set_error_code(static_cast<int>(absl::StatusCode::kAlreadyExists));
      launched->set_error_message(absl::StrCat("worker ", id, " was already launched"));
    }
  }
  if (launched->error_code() == 0) {
    if (worker_token_.empty()) {
      auto token = launch.env().find("HOROVODD_WORKER_TOKEN");
      if (token != launch.env().end()) worker_token_ = token->second;
    }
    if (daemon_address_.empty()) {
      auto address = launch.env().find("HOROVODD_DAEMON_ADDR");
      if (address != launch.env().end()) daemon_address_ = address->second;
    }
    daemon::WorkerLaunch worker;
    worker.spec.argv.assign(launch.argv().begin(), launch.argv().end());
    worker.spec.env.insert(launch.env().begin(), launch.env().end());
    RelayWorker(worker.spec.env);
    worker.spec.working_dir = launch.working_dir();
    daemon::ProcessCallbacks callbacks;
    callbacks.on_line = [this, id](daemon::OutputStream stream, std::string_view line) {
      OnLine(id, stream, line);
    };
    callbacks.on_exit = [this, id](const daemon::ExitInfo& exit) { OnExit(id, exit); };
    absl::StatusOr<daemon::LaunchedProcess> started =
        launcher_->Launch(worker, std::move(callbacks));
    absl::MutexLock lock(&mu_);
    if (started.ok()) {
      workers_[id].pid = started->pid;
      launched->set_pid(started->pid);
    } else {
      workers_.erase(id);
      launched->set_error_code(static_cast<int>(started.status().code()));
      launched->set_error_message(std::string(started.status().message()));
    }
  }
  // Launched goes before any of the worker's output: on the wire directly,
  // ahead of what is still queued.
  wire_ += EncodeFrame(event);
}

void ShimServer::RelayWorker(std::map<std::string, std::string>& env) {
  auto flag = env.find("HOROVODD_SHIM_RELAY");
  const bool asked = flag != env.end() ? flag->second == "1" : options_.relay;
  auto address = env.find("HOROVODD_DAEMON_ADDR");
  if (!asked || address == env.end() || address->second.empty()) return;
  if (!relay_) {
    HostRelayOptions relay;
    relay.daemon_address = address->second;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = WorkerCredentials(env);
    absl::StatusOr<std::unique_ptr<HostRelay>> started = absl::UnknownError("");
    if (credentials.ok()) {
      relay.credentials = *std::move(credentials);
      started = HostRelay::Start(std::move(relay));
    } else {
      started = credentials.status();
    }
    if (!started.ok()) {
      HVDD_LOG(WARNING) << "cannot relay the workers (they dial " << address->second
                        << " themselves): " << started.status().message();
      return;
    }
    relay_ = std::move(*started);
    relay_upstream_ = address->second;
    HVDD_LOG(INFO) << "relaying the workers' daemon traffic from " << relay_->address() << " to "
                   << address->second << " on one host stream";
  }
  // A worker told of another daemon address (a tunnel reopened elsewhere)
  // dials it itself.
  if (relay_upstream_ != address->second) return;
  address->second = relay_->address();
  env[kDaemonRelayedVariable] = "1";
}

void ShimServer::MoveQueuedToWire() {
  if (!greeted_) return;
  absl::MutexLock lock(&mu_);
  while (!queued_.empty() && wire_.size() < kWireHighWater) {
    v1::ShimEvent& event = queued_.front();
    if (event.has_output()) {
      queued_output_lines_ -= 1;
      queued_output_bytes_ -= event.output().line().size();
    }
    wire_ += EncodeFrame(event);
    queued_.pop_front();
  }
}

void ShimServer::FlushWire() {
  while (daemon_.valid() && !wire_.empty()) {
    const ssize_t n = send(daemon_.get(), wire_.data(), wire_.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Disconnect(strerror(errno));
      return;
    }
    wire_.erase(0, static_cast<size_t>(n));
  }
}

void ShimServer::HandleSignals() {
  signalfd_siginfo info;
  while (read(signals_.get(), &info, sizeof(info)) == sizeof(info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGTERM || sig == SIGINT) {
      HVDD_LOG(INFO) << "got signal " << sig << ": forwarding SIGTERM to the workers";
      SignalAll(SIGTERM);
    }
  }
}

}  // namespace horovodd::shim
