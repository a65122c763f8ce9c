// The worker's connection to the daemon that launched it: the unary calls of
// WorkerService (KvSet/KvGet, ReportCommit/ReportFailure) and the Attach
// stream that carries heartbeats and rendezvous requests up, generation
// notices and rendezvous answers down.
//
// Threads: the caller's threads make the unary calls (the stub is
// thread-safe) and wait for rendezvous answers. After StartAttach() three
// background threads run:
//   attach    reads the stream, reconnects with backoff when it breaks (and
//             asks again for a rendezvous still unanswered);
//   heartbeat writes a heartbeat every interval and watches how long the
//             daemon has been out of reach (the grace period);
//   reporter  sends queued commit/failure reports, so training never waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "horovodd.grpc.pb.h"
#include "worker_runtime/daemon_client/daemon_connection.h"

namespace horovodd::internal {

struct DaemonClientOptions {
  std::string address;  // host:port of the daemon's worker service
  std::string job_id;
  int64_t worker_id = 0;
  std::string token;  // may be empty
  // TLS to the daemon (HOROVODD_TLS*, set by the daemon for its workers):
  // the CA its certificate is checked against (empty: the system's roots),
  // and this worker's certificate and key for mutual TLS (PEM file paths).
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Until the daemon names one (DaemonMessage.heartbeat_interval_ms, scaled
  // with the job's size); from then on the daemon's, which judges liveness,
  // at most a quarter of daemon_grace (heartbeats also feed that watchdog).
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  // `address` is the relay of this worker's shim, not the daemon
  // (HOROVODD_DAEMON_RELAYED=1): a heartbeat written there says nothing of
  // the daemon, so only the daemon's answers count as contact.
  bool relayed = false;
  // How long the daemon may stay out of reach before on_daemon_lost runs.
  absl::Duration daemon_grace = absl::Seconds(30);
  // Deadline of each KvSet.
  absl::Duration call_timeout = absl::Seconds(30);
  // Runs on the attach thread for every DaemonMessage (after the newest
  // generation was recorded). Must not block.
  std::function<void(int64_t generation, bool abort)> on_message;
  // Runs on the heartbeat thread before each heartbeat: what the worker is
  // doing, carried in it (Heartbeat.activity). Must be quick and not block.
  // Unset: heartbeats carry none.
  std::function<v1::WorkerActivity()> activity;
  // Runs once on the heartbeat thread when the daemon was out of reach for
  // daemon_grace. Unset: print "lost the daemon at ADDR for 30s, exiting" and
  // ExitProcess(ExitReason::kDaemonLost) (process_exit.h: _exit(1) unless a
  // test replaced the hook), so a worker never outlives its daemon.
  std::function<void()> on_daemon_lost;
};

class DaemonClient final : public DaemonConnection {
 public:
  // Creates the channel (connecting lazily); starts no thread.
  static absl::StatusOr<std::unique_ptr<DaemonClient>> Create(DaemonClientOptions options);
  ~DaemonClient() override;  // Stop()

  DaemonClient(const DaemonClient&) = delete;
  DaemonClient& operator=(const DaemonClient&) = delete;

  // Opens the Attach stream (hello first) and starts the background threads.
  void StartAttach() override;
  // Sends what the reporter still holds (for 5 s at most), closes the stream
  // and joins the threads. Idempotent.
  void Stop() override;

  // Waits as long as it takes for the first stable generation newer than
  // after_generation, asking on the Attach stream (StartAttach first): asks
  // again on every new stream while the daemon is out of reach (the grace
  // watchdog bounds that). Errors come back as the daemon sent them, a
  // refused Attach stream's too; CANCELLED once Stop() is called. One
  // caller at a time.
  absl::StatusOr<v1::RendezvousResponse> Rendezvous(int64_t after_generation) override;

  absl::Status KvSet(int64_t generation, const std::string& key, std::string value) override;
  // The values of all keys once all exist; DEADLINE_EXCEEDED if they do not
  // within `timeout`, ABORTED if the generation is superseded meanwhile.
  absl::StatusOr<std::vector<std::string>> KvGet(int64_t generation,
                                                 const std::vector<std::string>& keys,
                                                 absl::Duration timeout) override;

  // Queued for the reporter thread; a newer commit replaces an unsent one.
  void ReportCommit(int64_t generation, int64_t commit) override;
  void ReportFailure(int64_t generation, std::string message) override;

  // The generation heartbeats carry (this worker's current one).
  void set_current_generation(int64_t generation) override { current_generation_ = generation; }
  // The newest generation any DaemonMessage announced (0 before any).
  int64_t newest_generation() const override { return newest_generation_; }
  // How often heartbeats go out now (see DaemonClientOptions::heartbeat_interval).
  absl::Duration heartbeat_interval() const {
    return absl::Microseconds(heartbeat_interval_us_.load());
  }

 private:
  using AttachStream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::DaemonMessage>;
  struct PendingFailure {
    int64_t generation;
    std::string message;
  };

  DaemonClient(DaemonClientOptions options, std::shared_ptr<grpc::Channel> channel);
  v1::WorkerIdentity Identity() const;
  void AttachLoop();
  void HeartbeatLoop();
  void ReporterLoop();
  // One Attach stream from hello to its end; true if the daemon sent anything.
  bool RunOneStream();
  // Writes the unanswered rendezvous request, if any, on stream_: each
  // stream is asked once.
  void AskPendingRendezvousLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_)
      ABSL_LOCKS_EXCLUDED(rendezvous_mu_);
  // Hands an answer read from the stream to the waiting Rendezvous call
  // (`any_id`: whatever request it waits for, e.g. the stream's refusal).
  void DeliverRendezvous(const v1::StreamRendezvousAnswer& answer, bool any_id = false)
      ABSL_LOCKS_EXCLUDED(rendezvous_mu_);
  bool SendCommit(const v1::CommitReport& report, absl::Time deadline);
  void SendFailure(const PendingFailure& failure, absl::Time deadline);
  void MarkContact() ABSL_LOCKS_EXCLUDED(contact_mu_);
  // Follows the interval a DaemonMessage names (0: it names none).
  void FollowHeartbeatInterval(int64_t interval_ms) ABSL_LOCKS_EXCLUDED(contact_mu_);
  // Sleeps up to `d` unless Stop() is called; false once stopping.
  bool SleepUnlessStopping(absl::Duration d) ABSL_LOCKS_EXCLUDED(contact_mu_);
  // Sleeps until the current heartbeat interval has passed since `last`
  // (the interval may change meanwhile); false once stopping.
  bool SleepUntilNextHeartbeat(absl::Time last) ABSL_LOCKS_EXCLUDED(contact_mu_);

  const DaemonClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::WorkerService::Stub> stub_;

  std::atomic<int64_t> current_generation_{0};
  std::atomic<int64_t> newest_generation_{0};
  std::atomic<int64_t> heartbeat_interval_us_;  // set from options_, then by the daemon
  std::atomic<bool> stopping_{false};
  bool started_ = false;  // owned by the caller of StartAttach/Stop

  // The live stream: stream_ is set once the hello went out; write_mu_ is
  // held across a Write (which cancelling the context ends). stream_context_
  // is under context_mu_ (held briefly) so Stop() can cancel the stream. The
  // attach thread owns both objects. Order: write_mu_ before rendezvous_mu_.
  absl::Mutex write_mu_;
  AttachStream* stream_ ABSL_GUARDED_BY(write_mu_) = nullptr;
  int64_t asked_on_stream_ ABSL_GUARDED_BY(write_mu_) = 0;  // the rendezvous id stream_ was asked
  absl::Mutex context_mu_;
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(context_mu_) = nullptr;

  // The rendezvous waiting for its answer: asked on every stream until
  // answered (see Rendezvous). Stop() signals the CondVar under the mutex.
  absl::Mutex rendezvous_mu_;
  absl::CondVar rendezvous_cv_;
  int64_t rendezvous_id_ ABSL_GUARDED_BY(rendezvous_mu_) = 0;  // the latest request's
  std::optional<v1::StreamRendezvous> rendezvous_ask_ ABSL_GUARDED_BY(rendezvous_mu_);
  std::optional<v1::StreamRendezvousAnswer> rendezvous_answer_ ABSL_GUARDED_BY(rendezvous_mu_);

  // The stop/sleep condition: stopping_ is set, and the heartbeat interval
  // changed, under contact_mu_, so a sleeper cannot miss either.
  absl::Mutex contact_mu_;
  absl::CondVar stop_cv_;
  absl::Time last_contact_ ABSL_GUARDED_BY(contact_mu_);

  // The reporter's queue.
  absl::Mutex report_mu_;
  absl::CondVar report_cv_;
  std::optional<v1::CommitReport> pending_commit_ ABSL_GUARDED_BY(report_mu_);
  std::deque<PendingFailure> pending_failures_ ABSL_GUARDED_BY(report_mu_);
  bool reporter_done_ ABSL_GUARDED_BY(report_mu_) = false;
  absl::Time flush_deadline_ ABSL_GUARDED_BY(report_mu_) = absl::InfiniteFuture();  // set by Stop()

  std::thread attach_thread_;
  std::thread heartbeat_thread_;
  std::thread reporter_thread_;
};

}  // namespace horovodd::internal
