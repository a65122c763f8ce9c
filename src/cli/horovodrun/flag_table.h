// horovodrun's flags: Horovod 0.28's table (names, groups, help text), the one-dash spellings
// CLI11 cannot register, and the CLI11 app made of the table. Data and help only: what the
// values mean is run_options.cc's business.
#pragma once

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/types/span.h"

namespace horovodd::cli {

// One horovodrun flag. `key` names the flag; `setting` the setting it gives (and its
// --config-file key), when that differs: the two flags of an on/off pair give one setting
// (--hierarchical-allreduce true, --no-hierarchical-allreduce false). `display` is how
// error messages name the flag.
struct FlagDef {
  const char* key;
  const char* names;  // for CLI11; "-np" is not a CLI11 name, so run_options.cc rewrites it
  const char* display;
  const char* value_text;  // placeholder in the help; empty for on/off flags
  const char* help;
  const char* group;                // empty: accepted, left out of the help (as Horovod hides it)
  const char* setting = nullptr;    // nullptr: key
  const char* flag_value = "true";  // what an on/off flag sets: "true", or "false" for --no-x
};

// Horovod's flags spelled with one dash and several letters, which CLI11 cannot register:
// run_options.cc rewrites them, the help shows them.
struct SingleDashAlias {
  const char* alias;
  const char* long_name;
};

// Every flag, in Horovod's groups and order, then ours.
absl::Span<const FlagDef> Flags();
absl::Span<const SingleDashAlias> SingleDashAliases();

// How messages name the flag CLI11 knows as `name` ("--num-proc" -> "-np/--num-proc").
std::string DisplayName(const std::string& name);

// The setting a flag gives (its --config-file key): `setting`, else `key`.
std::string SettingOf(const FlagDef& flag);

// The flag table as a CLI11 app: it knows each flag's arity and collects the values as text;
// run_options.cc converts and checks them, for the command line and the config file alike.
std::unique_ptr<CLI::App> MakeFlagApp();

}  // namespace horovodd::cli
