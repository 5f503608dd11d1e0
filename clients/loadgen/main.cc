// gangsched-loadgen: drives the committing path of a real server over gRPC
// (async callback client): each of --concurrency workers submits a unique
// workload (Allocate), releases it (Release), and starts again, until
// --duration is over. Every status is checked; prints pairs/s (pairs
// whose calls were all answered OK; errors are counted by status code) and the
// p50/p90/p99/p999 latency of each call. Other modes: --mode=dry-run
// (Allocate with dry_run) and --mode=get (GetWorkload of one workload).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gangsched/v1/scheduler.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace {

namespace v1 = ::gangsched::v1;

struct Options {
  std::string server = "127.0.0.1:50051";
  std::string mode = "allocate-release";
  int concurrency = 64;
  absl::Duration duration = absl::Seconds(10);
  int channels = 4;
  std::string queue = "default";
  std::string prefix = "loadgen";
};

struct Stats {
  std::vector<double> allocate_ms, release_ms;
  std::map<std::string, int64_t> errors;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1,
                      static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i),
                   v.end());
  return v[i];
}

v1::WorkloadSpec Workload(const Options& o, const std::string& id) {
  v1::WorkloadSpec w;
  w.set_id(id);
  w.set_queue(o.queue);
  auto* head = w.add_groups();
  head->set_name("head");
  (*head->mutable_resources())["cpu"] = "1";
  head->set_min_count(1);
  head->set_desired_count(1);
  auto* workers = w.add_groups();
  workers->set_name("worker");
  (*workers->mutable_resources())["nvidia.com/gpu"] = "1";
  workers->set_min_count(2);
  workers->set_desired_count(2);
  return w;
}

// One worker: a chain of calls, each started from the previous callback.
class Worker {
 public:
  Worker(const Options& o, v1::Scheduler::Stub* stub, int index, absl::Time end,
         std::atomic<int>* running, std::mutex* mu,
         std::condition_variable* done)
      : o_(o),
        stub_(stub),
        index_(index),
        end_(end),
        running_(running),
        mu_(mu),
        done_(done) {}

  void Start() { Next(); }
  Stats& stats() { return stats_; }
  int64_t pairs() const { return pairs_; }

 private:
  void Next() {
    if (absl::Now() >= end_) {
      std::lock_guard lock(*mu_);
      if (--*running_ == 0) done_->notify_all();
      return;
    }
    ++seq_;
    id_ = absl::StrCat(o_.prefix, "/", index_, "-", seq_);
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
    started_ = absl::Now();
    if (o_.mode == "get") {
      get_.set_workload_id(absl::StrCat(o_.prefix, "/probe"));
      stub_->async()->GetWorkload(
          ctx_.get(), &get_, &status_,
          [this](grpc::Status s) { Finished(s, false, true); });
      return;
    }
    allocate_.Clear();
    allocate_.set_request_id(absl::StrCat(id_, "-a"));
    *allocate_.mutable_workload() = Workload(o_, id_);
    allocate_.set_dry_run(o_.mode == "dry-run");
    stub_->async()->Allocate(
        ctx_.get(), &allocate_, &allocated_, [this](grpc::Status s) {
          Finished(s, false, o_.mode != "allocate-release");
        });
  }

  void Finished(const grpc::Status& s, bool release, bool last) {
    // Only answered calls count, in the rate and in the latencies: a dead
    // server fails fast, and would otherwise look like a fast one.
    if (s.ok()) {
      double ms = absl::ToDoubleMilliseconds(absl::Now() - started_);
      (release ? stats_.release_ms : stats_.allocate_ms).push_back(ms);
    } else {
      std::string call = release            ? "Release"
                         : o_.mode == "get" ? "GetWorkload"
                                            : "Allocate";
      ++stats_.errors[absl::StrCat(
          call, " ",
          absl::StatusCodeToString(
              static_cast<absl::StatusCode>(s.error_code())),
          ": ", s.error_message().substr(0, 80))];
    }
    if (last || !s.ok()) {
      if (s.ok()) ++pairs_;
      Next();
      return;
    }
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
    release_.set_request_id(absl::StrCat(id_, "-r"));
    release_.set_workload_id(id_);
    started_ = absl::Now();
    stub_->async()->Release(
        ctx_.get(), &release_, &released_,
        [this](grpc::Status rs) { Finished(rs, true, true); });
  }

  const Options& o_;
  v1::Scheduler::Stub* stub_;
  int index_;
  absl::Time end_;
  std::atomic<int>* running_;
  std::mutex* mu_;
  std::condition_variable* done_;
  Stats stats_;
  int64_t pairs_ = 0;
  int64_t seq_ = 0;
  std::string id_;
  absl::Time started_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  v1::AllocateRequest allocate_;
  v1::AllocateResponse allocated_;
  v1::ReleaseRequest release_;
  v1::ReleaseResponse released_;
  v1::GetWorkloadRequest get_;
  v1::WorkloadStatus status_;
};

int Usage() {
  std::fprintf(stderr,
               "usage: gangsched-loadgen [--server=ADDR] "
               "[--mode=allocate-release|dry-run|get]\n"
               "       [--concurrency=N] [--duration=SECONDS] [--channels=N] "
               "[--queue=Q]\n"
               "       [--prefix=P]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      std::string p = absl::StrCat("--", name, "=");
      return arg.rfind(p, 0) == 0 ? argv[i] + p.size() : nullptr;
    };
    double seconds;
    if (const char* v = value("server")) {
      o.server = v;
    } else if (const char* v = value("mode")) {
      o.mode = v;
    } else if (const char* v = value("concurrency")) {
      if (!absl::SimpleAtoi(v, &o.concurrency) || o.concurrency < 1)
        return Usage();
    } else if (const char* v = value("duration")) {
      if (!absl::SimpleAtod(v, &seconds) || seconds <= 0) return Usage();
      o.duration = absl::Seconds(seconds);
    } else if (const char* v = value("channels")) {
      if (!absl::SimpleAtoi(v, &o.channels) || o.channels < 1) return Usage();
    } else if (const char* v = value("queue")) {
      o.queue = v;
    } else if (const char* v = value("prefix")) {
      o.prefix = v;
    } else {
      return Usage();
    }
  }
  if (o.mode != "allocate-release" && o.mode != "dry-run" && o.mode != "get")
    return Usage();

  std::vector<std::unique_ptr<v1::Scheduler::Stub>> stubs;
  for (int c = 0; c < o.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("gangsched.loadgen.channel",
                c);  // distinct channels, not shared
    stubs.push_back(v1::Scheduler::NewStub(grpc::CreateCustomChannel(
        o.server, grpc::InsecureChannelCredentials(), args)));
  }
  if (o.mode == "get") {  // the workload every GetWorkload asks for
    grpc::ClientContext ctx;
    v1::AllocateRequest req;
    *req.mutable_workload() = Workload(o, absl::StrCat(o.prefix, "/probe"));
    v1::AllocateResponse resp;
    grpc::Status s = stubs[0]->Allocate(&ctx, req, &resp);
    if (!s.ok()) {
      std::fprintf(stderr, "setup Allocate failed: %s\n",
                   s.error_message().c_str());
      return 1;
    }
  }
  std::mutex mu;
  std::condition_variable done;
  std::atomic<int> running{o.concurrency};
  absl::Time start = absl::Now();
  absl::Time end = start + o.duration;
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < o.concurrency; ++i) {
    workers.push_back(std::make_unique<Worker>(o, stubs[i % o.channels].get(),
                                               i, end, &running, &mu, &done));
  }
  for (auto& w : workers) w->Start();
  {
    std::unique_lock lock(mu);
    done.wait(lock, [&] { return running.load() == 0; });
  }
  double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  Stats all;
  int64_t pairs = 0;
  for (auto& w : workers) {
    pairs += w->pairs();
    auto& s = w->stats();
    all.allocate_ms.insert(all.allocate_ms.end(), s.allocate_ms.begin(),
                           s.allocate_ms.end());
    all.release_ms.insert(all.release_ms.end(), s.release_ms.begin(),
                          s.release_ms.end());
    for (auto& [k, v] : s.errors) all.errors[k] += v;
  }
  int64_t errors = 0;
  for (auto& [k, v] : all.errors) errors += v;
  std::printf("mode=%s server=%s concurrency=%d duration=%.1fs\n",
              o.mode.c_str(), o.server.c_str(), o.concurrency, elapsed);
  std::printf("%s/s: %.0f   errors: %lld\n",
              o.mode == "allocate-release" ? "pairs" : "calls",
              static_cast<double>(pairs) / elapsed,
              static_cast<long long>(errors));
  for (auto [name, v] :
       {std::pair<const char*, std::vector<double>*>{
            o.mode == "get" ? "GetWorkload" : "Allocate", &all.allocate_ms},
        {"Release", &all.release_ms}}) {
    if (v->empty()) continue;
    std::printf("%-12s n=%zu p50=%.3fms p90=%.3fms p99=%.3fms p999=%.3fms\n",
                name, v->size(), Percentile(*v, 0.5), Percentile(*v, 0.9),
                Percentile(*v, 0.99), Percentile(*v, 0.999));
  }
  for (auto& [k, v] : all.errors)
    std::printf("error x%lld: %s\n", static_cast<long long>(v), k.c_str());
  return errors == 0 ? 0 : 1;
}
