#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gangsched::server {

// A few threads that run the tasks handed to them, in order of arrival.
// The destructor runs what is still queued before it joins them, so a task
// handed over before then always runs (a gRPC call it finishes is never
// left open). The dry runs that wait for a busy core decide on these
// (docs/ARCHITECTURE.md, "Reads off the core thread").
class WorkerPool {
 public:
  // `name`: each thread's name in `top -H` and /proc (at most 15 bytes).
  WorkerPool(int threads, const char* name);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Run(std::function<void()> task);

 private:
  void Work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gangsched::server
