// Waiting for a condition in tests: poll it against a generous deadline
// instead of sleeping a fixed time and hoping (test machines are small and
// loaded). False when the deadline passed first.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace horovodd::testing {

inline bool WaitUntil(const std::function<bool()>& condition,
                      std::chrono::milliseconds patience = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace horovodd::testing
