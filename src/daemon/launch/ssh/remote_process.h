// One process started on a remote host through an exec channel of its own SSH
// session, and the `kill` channels that signal its process group. The SSH
// launcher owns each one: the launching thread until Start() returned, then
// the launcher's I/O thread alone. libssh runs the callbacks that fill it on
// whichever of the two drives the session (libssh sessions are not
// thread-safe, so only one ever does).
#pragma once

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/launch/line_splitter.h"
#include "daemon/launch/process_types.h"
#include "daemon/launch/ssh/daemon_tunnel.h"
#include "daemon/launch/ssh/ssh_session.h"

namespace horovodd::daemon {

class RemoteProcess {
 public:
  // `tunnel` (may be null): the session's way back to the daemon.
  RemoteProcess(std::unique_ptr<SshSession> session, ProcessCallbacks callbacks,
                std::unique_ptr<DaemonTunnel> tunnel = nullptr);
  ~RemoteProcess();  // closes its channels and tunnel, then the session
  RemoteProcess(const RemoteProcess&) = delete;
  RemoteProcess& operator=(const RemoteProcess&) = delete;

  // Runs `command` (see RemoteLaunchCommand) in a new exec channel, with
  // `input` then end-of-file as its stdin, and drives the session until the remote shell reported
  // the pid, for at most `timeout`. Output meanwhile is held back, no callback runs. Errors name
  // the host: UNAVAILABLE (no channel, the connection broke), FAILED_PRECONDITION (the shell ended
  // first: its stderr is quoted), DEADLINE_EXCEEDED.
  absl::Status Start(const std::string& command, const std::string& input, absl::Duration timeout);

  // Hands out the output held back so far through on_line, and from now on
  // output as it arrives: the calling thread drives the session from now on.
  void StartDelivering();
  // No callback of this process runs any more (its launch was refused late).
  void ForgetCallbacks() { callbacks_ = {}; }

  // `kill -SIG -PID` on the host through a new channel, without blocking.
  void Signal(int sig);
  // Moves the kill channels and the tunnel's connections on; call after each
  // poll of the session.
  void AdvanceChannels();
  // The tunnel's sockets are polled by `event` from now on (no-op without one).
  void WatchTunnel(ssh_event event);
  // Bytes wait in the tunnel: poll again soon.
  bool TunnelBacklogged() const { return tunnel_ != nullptr && tunnel_->Backlogged(); }

  // The end: hands out what is left of a last line without '\n' on each
  // stream, then `note` (unless empty) as a last stderr line prefixed
  // "horovodd: ", and returns the callbacks, for on_exit.
  ProcessCallbacks Finish(const std::string& note);

  ssh_session session() const { return session_->get(); }
  const std::string& host() const { return session_->name(); }
  std::string LastError() const { return session_->LastError(); }
  int pid() const { return pid_; }  // on its host; also its process group id
  bool connected() const;
  bool closed() const { return closed_; }  // the host closed the channel: all output is in
  const std::optional<ExitInfo>& exit() const { return exit_; }
  // Why the exit status is -1 though the host reported an end (an unknown signal).
  const std::string& exit_note() const { return exit_note_; }

 private:
  class KillChannel;

  void InstallCallbacks();
  void OnData(std::string_view bytes, OutputStream stream);
  void Deliver(std::string_view bytes, OutputStream stream);
  LineSplitter::Emit Emitter(OutputStream stream);
  // Takes the pid from the marker line in the held stdout and drops that line.
  bool TakePid();

  const std::unique_ptr<SshSession> session_;
  ProcessCallbacks callbacks_;
  const std::unique_ptr<DaemonTunnel> tunnel_;  // goes before session_ (declared after it)
  ssh_channel channel_ = nullptr;
  ssh_channel_callbacks_struct channel_callbacks_ = {};  // lives as long as channel_
  std::vector<std::unique_ptr<KillChannel>> kills_;      // their channels are the session's

  int pid_ = 0;
  bool delivering_ = false;  // false: output is held back raw in held_
  std::string held_[2];      // stdout, stderr
  LineSplitter lines_[2];
  std::optional<ExitInfo> exit_;
  std::string exit_note_;
  bool closed_ = false;
};

}  // namespace horovodd::daemon
