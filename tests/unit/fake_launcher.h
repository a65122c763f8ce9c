// The part every fake launcher of the unit tests shares: its "processes" are
// callbacks the test ends itself, so nothing runs that could be stopped or
// left behind. A fake derives from this and implements Launch and Signal.
#pragma once

#include <cstddef>

#include "absl/time/time.h"
#include "daemon/launch/launcher.h"

namespace horovodd::testing {

class FakeLauncherBase : public daemon::Launcher {
 public:
  void TerminateAll(absl::Duration) override {}
  bool DetachAll() override { return false; }
  size_t running() const override { return 0; }
};

}  // namespace horovodd::testing
