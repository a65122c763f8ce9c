// horovodrun: submit a job to horovodd (or to one started inside this process
// when no --daemon is named), stream its output with rank prefixes and its
// membership changes, and exit with its outcome.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cli/client_credentials.h"
#include "cli/horovodrun/build_info.h"
#include "cli/horovodrun/output_files.h"
#include "cli/horovodrun/run_options.h"
#include "cli/horovodrun/slurm_settings.h"
#include "cli/leader_follower/job_watch.h"
#include "cli/leader_follower/leader_follower.h"
#include "common/log.h"
#include "daemon/service/daemon_server.h"
#include "horovodd.grpc.pb.h"

namespace {

using horovodd::v1::JobEvent;

// Ctrl-C once cancels the job (on the leader); twice stops waiting for it.
class InterruptHandler {
 public:
  InterruptHandler(horovodd::cli::LeaderFollower* daemons, std::string job_id,
                   horovodd::cli::WatchStopper* watch)
      : daemons_(daemons), job_id_(std::move(job_id)), watch_(watch) {}

  void Start() {
    std::thread([this] {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGINT);
      sigaddset(&set, SIGTERM);
      for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) continue;
        if (interrupts_.fetch_add(1) == 0) {
          std::cerr << "horovodrun: cancelling job " << job_id_
                    << " (interrupt again to stop waiting)" << std::endl;
          horovodd::v1::CancelJobRequest request;
          request.set_job_id(job_id_);
          request.set_reason(absl::StrCat("cancelled by horovodrun (", strsignal(sig), ")"));
          daemons_->Run([&request](const std::string&,
                                   const std::shared_ptr<grpc::Channel>& channel,
                                   grpc::ClientContext& context) {
            context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
            horovodd::v1::CancelJobResponse response;
            return horovodd::v1::JobService::NewStub(channel)->CancelJob(&context, request,
                                                                         &response);
          });
        } else {
          detached_ = true;
          watch_->Stop();
          return;
        }
      }
    }).detach();
  }
  bool detached() const { return detached_.load(); }

 private:
  horovodd::cli::LeaderFollower* daemons_;
  std::string job_id_;
  horovodd::cli::WatchStopper* watch_;
  std::atomic<int> interrupts_{0};
  std::atomic<bool> detached_{false};
};

// Where worker lines go besides the terminal, and how they are prefixed.
struct OutputSettings {
  bool verbose = false;
  bool timestamps = false;                          // --prefix-output-with-timestamp
  horovodd::cli::RankOutputFiles* files = nullptr;  // --output-filename
};

void PrintEvent(const JobEvent& event, const OutputSettings& output) {
  const bool verbose = output.verbose;
  switch (event.kind()) {
    case JobEvent::OUTPUT: {
      std::ostream& out = event.stream() == "stderr" ? std::cerr : std::cout;
      // Horovod's prefix: "[rank]<stream>:", after the time with --prefix-output-with-timestamp.
      const std::string line =
          absl::StrCat(output.timestamps ? horovodd::cli::AsctimeNow() : "", "[", event.rank(),
                       "]<", event.stream(), ">:", event.message());
      // Flushed per line: whoever reads our output (a person, a log shipper,
      // a test) sees worker lines as they happen, not when a buffer fills.
      out << line << std::endl;
      if (output.files != nullptr) {
        absl::Status written = output.files->Write(event.rank(), event.stream(), line);
        if (!written.ok()) {
          std::cerr << "horovodrun: warning: --output-filename: " << written.message() << std::endl;
        }
      }
      break;
    }
    case JobEvent::MEMBERSHIP:
    case JobEvent::WARNING:
      std::cout.flush();
      std::cerr << "horovodrun: " << event.message() << std::endl;
      break;
    case JobEvent::INFO:
      // A spare taking a place is part of the reset's story, as the generations are.
      if (verbose || event.code() == "spare_swapped") {
        std::cout.flush();
        std::cerr << "horovodrun: " << event.message() << std::endl;
      }
      break;
    default:
      break;
  }
}

int Run(const horovodd::cli::RunOptions& options) {
  for (const std::string& warning : options.warnings) {
    std::cerr << "horovodrun: warning: " << warning << "\n";
  }
  if (absl::Status slurm = horovodd::cli::CheckSlurmReachable(options.spec); !slurm.ok()) {
    std::cerr << "horovodrun: error: " << slurm.message() << "\n";
    return 1;
  }
  OutputSettings output;
  output.verbose = options.verbose;
  output.timestamps = options.prefix_output_with_timestamp;
  std::unique_ptr<horovodd::cli::RankOutputFiles> files;
  if (!options.output_filename.empty()) {
    auto opened =
        horovodd::cli::RankOutputFiles::Open(options.output_filename, options.spec.num_proc());
    if (!opened.ok()) {
      std::cerr << "horovodrun: error: " << opened.status().message() << "\n";
      return 2;
    }
    files = std::move(*opened);
    output.files = files.get();
  }
  std::unique_ptr<horovodd::daemon::DaemonServer> embedded;
  std::string address = options.daemon_address;
  if (address.empty()) {
    if (options.detach) {
      std::cerr << "horovodrun: error: --detach needs --daemon ADDRESS (an embedded daemon "
                   "ends with horovodrun)\n";
      return 2;
    }
    // The embedded daemon's log lines (common/log.h) go to stderr as ours.
    horovodd::SetLogPrefix("horovodrun");
    horovodd::daemon::DaemonOptions daemon_options;
    // The status page is on unless HOROVODD_STATUS_PAGE_LISTEN says where
    // else, or "" for nowhere.
    const char* page = std::getenv("HOROVODD_STATUS_PAGE_LISTEN");
    daemon_options.status_page_listen = page != nullptr ? page : "127.0.0.1:0";
    auto daemon = horovodd::daemon::DaemonServer::Start(daemon_options);
    if (!daemon.ok()) {
      std::cerr << "horovodrun: error: cannot start the embedded daemon: "
                << daemon.status().message() << "\n";
      return 1;
    }
    embedded = std::move(*daemon);
    address = embedded->address();
    if (options.verbose) std::cerr << "horovodrun: embedded daemon on " << address << "\n";
  }
  // The embedded daemon's token never leaves this process; a named daemon
  // (or several, an HA setup) gets this user's credentials (--token-file,
  // HOROVODD_TOKEN, ..., TLS).
  std::vector<std::string> addresses = {address};
  if (!embedded) {
    auto listed = horovodd::cli::SplitDaemonAddresses(address);
    if (!listed.ok()) {
      std::cerr << "horovodrun: error: --daemon: " << listed.status().message() << "\n";
      return 2;
    }
    addresses = *listed;
    if (auto checked = horovodd::cli::ConnectToDaemon(addresses.front(), options.security);
        !checked.ok()) {
      std::cerr << "horovodrun: error: " << checked.status().message() << "\n";
      return 2;
    }
  }
  horovodd::cli::FollowOptions follow;
  follow.addresses = addresses;
  horovodd::cli::LeaderFollower daemons(
      follow, [&embedded, &options](const std::string& to) -> std::shared_ptr<grpc::Channel> {
        if (embedded) {
          return horovodd::cli::CreateDaemonChannel(to, grpc::InsecureChannelCredentials(),
                                                    embedded->admin_token());
        }
        return *horovodd::cli::ConnectToDaemon(to, options.security);
      });

  horovodd::v1::SubmitJobRequest submit;
  *submit.mutable_spec() = options.spec;
  // One id for every try below: a try whose answer was lost (a timeout, the
  // daemon gone, a takeover) made the job, and the next try gets that job.
  absl::StatusOr<std::string> request_id = horovodd::cli::NewClientRequestId();
  if (!request_id.ok()) {
    std::cerr << "horovodrun: error: " << request_id.status().message() << "\n";
    return 1;
  }
  submit.set_client_request_id(*request_id);
  horovodd::v1::SubmitJobResponse submitted;
  {
    // A daemon still starting (or an election under way) is waited for.
    horovodd::cli::FollowResult result = daemons.Run(
        [&](const std::string&, const std::shared_ptr<grpc::Channel>& channel,
            grpc::ClientContext& context) {
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          return horovodd::v1::JobService::NewStub(channel)->SubmitJob(&context, submit,
                                                                       &submitted);
        },
        /*retry_unreachable=*/true);
    if (!result.gave_up.empty()) {
      std::cerr << "horovodrun: error: job not accepted: " << result.gave_up << "\n";
      return 1;
    }
    if (!result.status.ok()) {
      std::cerr << "horovodrun: error: job not accepted by " << result.address << ": "
                << result.status.message() << "\n";
      return result.status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  }
  const std::string job_id = submitted.job_id();
  if (options.detach) {
    std::cout << job_id << std::endl;
    return 0;
  }
  if (options.verbose) std::cerr << "horovodrun: job " << job_id << " submitted\n";
  if (embedded && !embedded->status_page_viewer_link().empty()) {
    std::cerr << "horovodrun: status page: " << embedded->status_page_viewer_link() << "\n";
  }

  // Follows the job's events, through a restart of its daemon or a takeover
  // by a standby, from the event after the last one shown.
  horovodd::cli::WatchStopper stopper;
  InterruptHandler interrupts(&daemons, job_id, &stopper);
  interrupts.Start();
  horovodd::cli::WatchOutcome watched = horovodd::cli::WatchJobEvents(
      daemons, job_id, 0, [&output](const JobEvent& event) { PrintEvent(event, output); },
      &stopper);
  const bool ended = watched.ended;
  const JobEvent& end = watched.end;
  std::cout.flush();
  if (interrupts.detached()) {
    std::cerr << "horovodrun: stopped waiting; job " << job_id
              << (embedded ? " is being stopped with the embedded daemon" : " keeps running")
              << "\n";
    return 130;
  }
  if (!ended) {
    std::cerr << "horovodrun: error: lost the daemon: " << watched.status.message() << "\n";
    return 1;
  }
  if (end.state() == horovodd::v1::SUCCEEDED) {
    if (options.verbose) std::cerr << "horovodrun: job succeeded: " << end.message() << "\n";
    return 0;
  }
  std::cerr << "horovodrun: job " << horovodd::v1::JobState_Name(end.state()) << ": "
            << end.message() << "\n";
  return end.state() == horovodd::v1::CANCELLED ? 130 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto outcome = horovodd::cli::ParseRunOptions(argc, argv);
  if (outcome.kind == horovodd::cli::ParseOutcome::Kind::kHelp) {
    std::cout << outcome.text;
    return 0;
  }
  if (outcome.kind == horovodd::cli::ParseOutcome::Kind::kVersion) {
    std::cout << horovodd::cli::VersionText() << "\n";
    return 0;
  }
  if (outcome.kind == horovodd::cli::ParseOutcome::Kind::kCheckBuild) {
    std::cout << horovodd::cli::CheckBuildText();
    return 0;
  }
  if (outcome.kind == horovodd::cli::ParseOutcome::Kind::kError) {
    std::cerr << outcome.text << "\n";
    return 2;
  }
  // Signals go to the interrupt thread only; block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return Run(outcome.options);
}
