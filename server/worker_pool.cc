#include "server/worker_pool.h"

#include <pthread.h>

#include <algorithm>

namespace gangsched::server {

WorkerPool::WorkerPool(int threads, const char* name) {
  for (int i = 0; i < std::max(threads, 1); ++i) {
    threads_.emplace_back([this, name] {
      pthread_setname_np(pthread_self(), name);
      Work();
    });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::Run(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkerPool::Work() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and nothing left to run
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace gangsched::server
