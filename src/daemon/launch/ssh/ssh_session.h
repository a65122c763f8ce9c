// One connected, verified and authenticated libssh session to a host: TCP
// connect (with a timeout), host key check against a known_hosts file as
// OpenSSH's StrictHostKeyChecking does, public key login. Every error names
// the host and what failed. Used by the SSH launcher; a session is used by one
// thread at a time (libssh sessions are not thread-safe).
#pragma once

#include <libssh/libssh.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/launch/ssh/ssh_options.h"

namespace horovodd::daemon {

class SshSession {
 public:
  // Blocks up to about `timeout` per step (connect, key exchange, login).
  // UNAVAILABLE: the host cannot be reached (refused, timed out, no route, no
  // such name). PERMISSION_DENIED: its host key is not the one recorded, or is
  // unknown under "strict", or cannot be recorded. UNAUTHENTICATED: the login
  // was refused or the identity file cannot be read.
  static absl::StatusOr<std::unique_ptr<SshSession>> Connect(const std::string& host,
                                                             const SshOptions& options,
                                                             absl::Duration timeout);
  ~SshSession();  // disconnects
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  ssh_session get() const { return session_; }
  // "127.0.0.2" or "127.0.0.2 port 2222", for messages.
  const std::string& name() const { return name_; }
  // The last libssh error on this session.
  std::string LastError() const;

 private:
  SshSession(ssh_session session, std::string name) : session_(session), name_(std::move(name)) {}

  absl::Status VerifyHostKey(const SshOptions& options, const std::string& known_hosts);
  // accept-new: appends the host's key to `known_hosts` unless another session just did.
  absl::Status RecordHostKey(const std::string& known_hosts);
  absl::Status Authenticate(const SshOptions& options, const std::string& user);

  const ssh_session session_;
  const std::string name_;
};

}  // namespace horovodd::daemon
