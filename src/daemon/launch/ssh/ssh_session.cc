#include "daemon/launch/ssh/ssh_session.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace horovodd::daemon {
namespace {

// The daemon's user: its name (the default login) and home (the default
// known_hosts), as OpenSSH's client takes them.
struct LocalUser {
  std::string name;
  std::string home;
};

// Held while a known_hosts file is looked up and appended to: one session at a time in
// this process (the mutex), and one process at a time (flock on the file, where it can be
// opened; OpenSSH's client takes no lock, so only our own writers are kept apart).
ABSL_CONST_INIT absl::Mutex known_hosts_mu(absl::kConstInit);

class KnownHostsLock {
 public:
  explicit KnownHostsLock(const std::string& path) : hold_(&known_hosts_mu) {
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0) {
      while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~KnownHostsLock() {
    if (fd_ >= 0) close(fd_);  // drops the flock
  }
  KnownHostsLock(const KnownHostsLock&) = delete;
  KnownHostsLock& operator=(const KnownHostsLock&) = delete;

 private:
  absl::MutexLock hold_;
  int fd_ = -1;
};

LocalUser CurrentUser() {
  LocalUser user;
  std::vector<char> buffer(16 * 1024);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found) {
    user.name = found->pw_name;
    user.home = found->pw_dir;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') user.home = home;
  return user;
}

std::string HostName(const std::string& host, int port) {
  return port == 22 ? host : absl::StrCat(host, " port ", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SshSession>> SshSession::Connect(const std::string& host,
                                                                const SshOptions& options,
                                                                absl::Duration timeout) {
  const int port = options.port > 0 ? options.port : 22;
  ssh_session raw = ssh_new();
  if (raw == nullptr) return absl::ResourceExhaustedError("cannot allocate a libssh session");
  std::unique_ptr<SshSession> session(new SshSession(raw, HostName(host, port)));

  const LocalUser local = CurrentUser();
  const std::string user = options.user.empty() ? local.name : options.user;
  const std::string known_hosts = options.known_hosts_file.empty()
                                      ? absl::StrCat(local.home, "/.ssh/known_hosts")
                                      : options.known_hosts_file;
  const long timeout_seconds =
      std::max<long>(1, absl::ToInt64Seconds(absl::Ceil(timeout, absl::Seconds(1))));
  // Small messages both ways (a worker's calls through its tunnel, kill
  // commands): none may wait for the previous one's acknowledgement.
  const int no_delay = 1;
  if (ssh_options_set(raw, SSH_OPTIONS_HOST, host.c_str()) != SSH_OK ||
      ssh_options_set(raw, SSH_OPTIONS_PORT, &port) != SSH_OK ||
      (!user.empty() && ssh_options_set(raw, SSH_OPTIONS_USER, user.c_str()) != SSH_OK) ||
      ssh_options_set(raw, SSH_OPTIONS_TIMEOUT, &timeout_seconds) != SSH_OK ||
      ssh_options_set(raw, SSH_OPTIONS_NODELAY, &no_delay) != SSH_OK ||
      ssh_options_set(raw, SSH_OPTIONS_KNOWNHOSTS, known_hosts.c_str()) != SSH_OK) {
    return absl::InvalidArgumentError(absl::StrCat("cannot set up an SSH session to ",
                                                   session->name(), ": ", session->LastError()));
  }
  if (ssh_connect(raw) != SSH_OK) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", session->name(), " over SSH: ", session->LastError()));
  }
  if (absl::Status verified = session->VerifyHostKey(options, known_hosts); !verified.ok()) {
    return verified;
  }
  if (absl::Status logged_in = session->Authenticate(options, user); !logged_in.ok()) {
    return logged_in;
  }
  return session;
}

SshSession::~SshSession() {
  if (ssh_is_connected(session_)) ssh_disconnect(session_);
  ssh_free(session_);
}

std::string SshSession::LastError() const {
  const char* error = ssh_get_error(session_);
  return error != nullptr && *error != '\0' ? error : "unknown error";
}

absl::Status SshSession::VerifyHostKey(const SshOptions& options, const std::string& known_hosts) {
  using Checking = SshOptions::HostKeyChecking;
  if (options.host_key_checking == Checking::kOff) return absl::OkStatus();
  switch (ssh_session_is_known_server(session_)) {
    case SSH_KNOWN_HOSTS_OK:
      return absl::OkStatus();
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      return absl::PermissionDeniedError(absl::StrCat(
          "the host key of ", name_, " does not match the one recorded for it in ", known_hosts,
          ": refusing to connect (the host may be an impostor; if its key really changed, "
          "remove the old entry from that file)"));
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (options.host_key_checking == Checking::kStrict) {
        return absl::PermissionDeniedError(absl::StrCat(
            "the host key of ", name_, " is not in ", known_hosts,
            " and --ssh-host-key-checking is strict: add it there, or use accept-new"));
      }
      return RecordHostKey(known_hosts);
    case SSH_KNOWN_HOSTS_ERROR:
      break;
  }
  return absl::PermissionDeniedError(absl::StrCat("cannot check the host key of ", name_,
                                                  " against ", known_hosts, ": ", LastError()));
}

absl::Status SshSession::RecordHostKey(const std::string& known_hosts) {
  // Several workers start on a new host at once: without the lock each of their sessions
  // finds the key missing and appends it, and the file holds it as many times.
  KnownHostsLock lock(known_hosts);
  // Looked up again under the lock: another session may have recorded it meanwhile.
  switch (ssh_session_is_known_server(session_)) {
    case SSH_KNOWN_HOSTS_OK:
      return absl::OkStatus();
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      break;
    default:
      return absl::PermissionDeniedError(absl::StrCat("the host key of ", name_, " changed in ",
                                                      known_hosts, " while it was being recorded"));
  }
  if (ssh_session_update_known_hosts(session_) != SSH_OK) {
    return absl::PermissionDeniedError(absl::StrCat("cannot record the host key of ", name_, " in ",
                                                    known_hosts, ": ", LastError()));
  }
  return absl::OkStatus();
}

absl::Status SshSession::Authenticate(const SshOptions& options, const std::string& user) {
  int result;
  std::string keys = "the SSH agent's and the default keys (~/.ssh/id_*)";
  if (options.identity_file.empty()) {
    result = ssh_userauth_publickey_auto(session_, nullptr, nullptr);
  } else {
    keys = absl::StrCat("the key in ", options.identity_file);
    ssh_key key = nullptr;
    if (ssh_pki_import_privkey_file(options.identity_file.c_str(), nullptr, nullptr, nullptr,
                                    &key) != SSH_OK) {
      return absl::UnauthenticatedError(absl::StrCat(
          "cannot log in to ", name_, ": cannot read a private key from --ssh-identity-file ",
          options.identity_file, " (missing, unreadable, not a key, or passphrase-protected)"));
    }
    result = ssh_userauth_publickey(session_, nullptr, key);
    ssh_key_free(key);
  }
  switch (result) {
    case SSH_AUTH_SUCCESS:
      return absl::OkStatus();
    case SSH_AUTH_DENIED:
      return absl::UnauthenticatedError(
          absl::StrCat(name_, " refused the login of user '", user, "' with ", keys));
    case SSH_AUTH_PARTIAL:
      return absl::UnauthenticatedError(
          absl::StrCat(name_, " wants more than a public key from user '", user,
                       "' (e.g. a password too), which horovodd cannot give"));
    default:
      return absl::UnavailableError(
          absl::StrCat("the login of user '", user, "' to ", name_, " failed: ", LastError()));
  }
}

}  // namespace horovodd::daemon
