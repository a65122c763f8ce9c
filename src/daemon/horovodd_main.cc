// horovodd: the long-running daemon. Serves jobs until SIGTERM/SIGINT, then
// ends every job with a recorded reason and exits 0.
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>

#include "daemon/daemon_server.h"

namespace {

int WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"horovodd: the elastic training daemon. Runs jobs submitted by horovodrun, "
               "keeping each between its min and max workers as hosts come and go."};
  horovodd::daemon::DaemonOptions options;
  options.listen_address = "127.0.0.1:7451";
  app.add_option("--listen", options.listen_address,
                 "host:port to serve on (port 0 picks a free one)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "horovodd: error: " << e.what() << "\n";
    return 2;
  }
  // Block the termination signals in every thread; main waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto daemon = horovodd::daemon::DaemonServer::Start(options);
  if (!daemon.ok()) {
    std::cerr << "horovodd: error: " << daemon.status().message() << "\n";
    return 1;
  }
  std::cout << "horovodd listening on " << (*daemon)->address() << std::endl;
  int sig = WaitForTerminationSignal();
  std::cout << "horovodd: " << strsignal(sig) << ", ending jobs" << std::endl;
  (*daemon)->Shutdown(std::string("daemon received ") + strsignal(sig));
  return 0;
}
