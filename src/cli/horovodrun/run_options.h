// horovodrun's command line (Horovod's launcher flags) and --config-file, turned into the
// JobSpec that horovodrun submits to the daemon. Parsing only: nothing here talks to a daemon
// or starts a process; it does read the host file and check that the discovery script and the
// working directory exist, so mistakes surface before the job is submitted.
#pragma once

#include <string>
#include <vector>

#include "cli/client_credentials.h"
#include "horovodd.pb.h"

namespace horovodd::cli {

struct RunOptions {
  horovodd::v1::JobSpec spec;
  std::string daemon_address;  // --daemon ADDRESS; empty = start an embedded daemon
  ClientSecurity security;     // how to reach --daemon (the embedded one needs nothing)
  bool verbose = false;
  std::string log_level = "warning";  // trace|debug|info|warning|error
  bool detach = false;                // --detach (submit, print job id, return)
  // --output-filename DIR (absolute): each rank's lines also go to DIR/rank.<rank>/stdout and
  // .../stderr, Horovod's layout (output_files.h). Empty: the terminal only.
  std::string output_filename;
  bool prefix_output_with_timestamp = false;  // --prefix-output-with-timestamp
  // One line each, for horovodrun to print before it submits: settings accepted for Horovod's
  // sake that have no effect here (tunables.h).
  std::vector<std::string> warnings;
};

struct ParseOutcome {
  // kVersion: -v/--version; kCheckBuild: -cb/--check-build (horovodrun prints what is built).
  enum class Kind { kRun, kHelp, kVersion, kCheckBuild, kError };
  Kind kind = Kind::kError;
  RunOptions options;  // kRun
  std::string text;    // kHelp: the help text; kError: ONE line "horovodrun: error: ..."
};

// argv[0] is the program. Our flags come first; the first positional argument (or whatever
// follows "--") starts the worker command, which keeps all of its own flags:
//   horovodrun -np 2 ./train --epochs 3   ->   spec.argv = {"./train", "--epochs", "3"}
// Settings from --config-file apply first; flags on the command line override them.
ParseOutcome ParseRunOptions(int argc, const char* const* argv);

}  // namespace horovodd::cli
