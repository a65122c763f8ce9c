// Remote launches run off the job's loop (daemon/launch/launch_pool.h): the pool's
// own contract, and a job driver whose remote launch hangs, which must keep
// answering, start its other workers, and stop the hung one's worker if it
// starts after all.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "daemon/job/job_manager.h"
#include "daemon/launch/launch_pool.h"
#include "daemon/launch/launcher.h"
#include "fake_launcher.h"
#include "job_spec_support.h"
#include "wait_until.h"

namespace horovodd::daemon {
namespace {

using testing::WaitUntil;

// "Did not hang" bound for every wait in this file.
constexpr auto kPatience = std::chrono::seconds(60);

// A latch the test opens.
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST_CASE("launch pool: at most max_threads tasks at once, all of them run", "[launch]") {
  Gate gate;
  std::atomic<int> running{0}, most{0}, finished{0};
  {
    LaunchPool pool(3);
    for (int i = 0; i < 7; ++i) {
      pool.Submit([&] {
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        gate.Pass();
        --running;
        ++finished;
      });
    }
    REQUIRE(WaitUntil([&] { return running.load() == 3; }, kPatience));
    gate.Open();
    REQUIRE(WaitUntil([&] { return finished.load() == 7; }, kPatience));
  }
  CHECK(most.load() == 3);
}

// Whether this thread ran a task already (a thread id may be reused by a
// later thread; its thread_locals start anew).
thread_local bool ran_a_task = false;

TEST_CASE("launch pool: tasks one after another reuse a thread", "[launch]") {
  LaunchPool pool(4);
  std::atomic<int> threads{0};
  for (int i = 0; i < 20; ++i) {
    std::atomic<bool> done{false};
    pool.Submit([&] {
      if (!ran_a_task) ++threads;
      ran_a_task = true;
      done = true;
    });
    REQUIRE(WaitUntil([&] { return done.load(); }, kPatience));
    // Time for the thread to be back waiting (it may still be on its way
    // when a loaded machine lets the next Submit come first: then a second
    // thread starts, and the two share the rest).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Each task came after the one before had ended: the thread that ran it
  // waited for the next (LaunchPool::kLinger) rather than ending, as a
  // thread of its own each would have.
  CHECK(threads.load() <= 3);
}

TEST_CASE("launch pool: shutdown waits for running tasks and drops the rest", "[launch]") {
  Gate gate;
  std::atomic<int> started{0}, finished{0};
  LaunchPool pool(1);
  for (int i = 0; i < 3; ++i) {
    pool.Submit([&] {
      ++started;
      gate.Pass();
      ++finished;
    });
  }
  REQUIRE(WaitUntil([&] { return started.load() == 1; }, kPatience));
  std::thread opener([&] {
    // Most often opened while Shutdown below is already waiting (which is
    // what is checked); either way Shutdown returns after the task ended.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.Open();
  });
  pool.Shutdown();
  CHECK(finished.load() == 1);
  pool.Submit([&] { ++started; });  // after shutdown: dropped
  CHECK(started.load() == 1);
  opener.join();
}

// Starts "processes" at once, except on hosts the test holds: Launch blocks
// there until the test lets it go. A signal ends the process (on_exit).
class HeldLauncher final : public testing::FakeLauncherBase {
 public:
  explicit HeldLauncher(std::set<std::string> held) : held_(std::move(held)) {}

  absl::StatusOr<LaunchedProcess> Launch(const WorkerLaunch& launch,
                                         ProcessCallbacks callbacks) override {
    if (held_.count(launch.host) > 0) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        waiting_.insert(launch.host);
      }
      release_.Pass();
    }
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t handle = next_handle_++;
    hosts_[handle] = launch.host;
    callbacks_[handle] = std::move(callbacks);
    return LaunchedProcess{handle, static_cast<int>(1000 + handle)};
  }

  absl::Status Signal(int64_t handle, int sig) override {
    ProcessCallbacks callbacks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = callbacks_.find(handle);
      if (it == callbacks_.end()) return absl::NotFoundError("already ended");
      signals_[hosts_[handle]].push_back(sig);
      callbacks = std::move(it->second);
      callbacks_.erase(it);
    }
    ExitInfo exit;
    exit.signal = sig;
    if (callbacks.on_exit) callbacks.on_exit(exit);
    return absl::OkStatus();
  }

  void Release() { release_.Open(); }
  bool Waiting(const std::string& host) {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_.count(host) > 0;
  }
  int Started(const std::string& host) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& [handle, h] : hosts_) n += h == host ? 1 : 0;
    return n;
  }
  std::vector<int> Signals(const std::string& host) {
    std::lock_guard<std::mutex> lock(mu_);
    return signals_[host];
  }

 private:
  const std::set<std::string> held_;
  Gate release_;
  std::mutex mu_;
  std::set<std::string> waiting_;
  int64_t next_handle_ = 1;
  std::map<int64_t, std::string> hosts_;
  std::map<int64_t, ProcessCallbacks> callbacks_;
  std::map<std::string, std::vector<int>> signals_;
};

TEST_CASE("a remote launch that hangs holds up neither the job's answers nor other launches",
          "[launch]") {
  HeldLauncher launcher({"hung.example"});
  JobManager jobs(&launcher);
  jobs.set_worker_address("127.0.0.1:1");  // the stand-in workers never dial it
  v1::JobSpec spec = testing::LocalJobSpec({"stand-in"}, 3, 1, 3);
  spec.mutable_discovery()->clear_hosts();
  for (const auto& [host, slots] : {std::pair<std::string, int>{"hung.example", 1},
                                    std::pair<std::string, int>{"ok.example", 2}}) {
    auto* h = spec.mutable_discovery()->add_hosts();
    h->set_host(host);
    h->set_slots(slots);
  }
  absl::StatusOr<std::string> id = jobs.Submit(spec);
  REQUIRE(id.ok());

  // hung.example sorts first: its launch starts first and hangs; both
  // workers of ok.example start meanwhile.
  REQUIRE(WaitUntil([&] { return launcher.Waiting("hung.example"); }, kPatience));
  REQUIRE(WaitUntil([&] { return launcher.Started("ok.example") == 2; }, kPatience));
  // And the job answers (its loop is free): the hung worker is a member
  // still starting, without a pid.
  auto status = std::async(std::launch::async, [&] { return jobs.Status(*id); });
  if (status.wait_for(kPatience) != std::future_status::ready) {
    launcher.Release();  // let the job unwind before failing
    FAIL("the job's status did not answer while a launch hung");
  }
  absl::StatusOr<v1::JobStatus> seen = status.get();
  REQUIRE(seen.ok());
  std::map<std::string, std::vector<int>> pids;
  for (const v1::WorkerStatus& w : seen->workers()) pids[w.host()].push_back(w.pid());
  CHECK(pids["hung.example"] == std::vector<int>{0});
  CHECK(pids["ok.example"].size() == 2);

  // Cancelled while it hangs: once it starts after all, its worker is
  // killed at once, and only then the job has ended.
  REQUIRE(jobs.Cancel(*id, "test over").ok());
  REQUIRE(WaitUntil(
      [&] {
        absl::StatusOr<v1::JobStatus> s = jobs.Status(*id);
        return s.ok() && s->state() == v1::CANCELLED;
      },
      kPatience));
  CHECK_FALSE(jobs.Find(*id)->Ended());
  launcher.Release();
  REQUIRE(WaitUntil([&] { return jobs.Find(*id)->Ended(); }, kPatience));
  CHECK(launcher.Signals("hung.example") == std::vector<int>{SIGKILL});
  CHECK(launcher.Signals("ok.example") == std::vector<int>{SIGTERM, SIGTERM});
}

}  // namespace
}  // namespace horovodd::daemon
