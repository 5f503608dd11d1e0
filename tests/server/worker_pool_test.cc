// WorkerPool: the threads the dry runs that waited for a busy core decide on.
#include "server/worker_pool.h"

#include <pthread.h>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace gangsched::server {
namespace {

TEST(WorkerPoolTest, RunsEveryTaskOnItsNamedThreads) {
  std::mutex mu;
  std::set<std::string> names;
  std::atomic<int> ran{0};
  {
    WorkerPool pool(2, "gs-test-pool");
    for (int i = 0; i < 100; ++i) {
      pool.Run([&] {
        char name[16] = {};
        pthread_getname_np(pthread_self(), name, sizeof name);
        std::lock_guard lock(mu);
        names.insert(name);
        ++ran;
      });
    }
  }  // the destructor runs what is still queued
  EXPECT_EQ(ran.load(), 100);
  EXPECT_EQ(names, std::set<std::string>{"gs-test-pool"});
}

TEST(WorkerPoolTest, ALongTaskDoesNotHoldUpTheOthersWithTwoThreads) {
  WorkerPool pool(2, "gs-test-pool");
  std::promise<void> release_long;
  std::promise<void> short_done;
  pool.Run([f = release_long.get_future().share()] { f.wait(); });
  pool.Run([&] { short_done.set_value(); });
  // The second task runs while the first still waits.
  short_done.get_future().wait();
  release_long.set_value();
}

TEST(WorkerPoolTest, AskedForNoThreadsItStillMakesOne) {
  // Zero threads asked for still makes one, so a task is never stranded.
  std::promise<int> answer;
  {
    WorkerPool pool(0, "gs-test-pool");
    pool.Run([&] { answer.set_value(42); });
  }
  EXPECT_EQ(answer.get_future().get(), 42);
}

}  // namespace
}  // namespace gangsched::server
