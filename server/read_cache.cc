#include "server/read_cache.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "server/frontend.h"
#include "server/log.h"

namespace gangsched::server {
namespace {

// One follower's stream on the core: updates queue here and go out one
// write at a time; a follower that falls kMaxQueuedUpdates behind is cut
// off (it follows again from a snapshot), so the core never waits on it.
class FollowStream final
    : public grpc::ServerWriteReactor<internal::ReplicaUpdate>,
      public ReplicaSink {
 public:
  FollowStream(ReplicationHub* hub, Metrics* metrics,
               const AccessControl* access,
               AccessControl::Credentials credentials)
      : hub_(hub),
        metrics_(metrics),
        access_(access),
        credentials_(std::move(credentials)),
        generation_(access->generation()),
        start_(absl::Now()) {}

  void set_id(uint64_t id) { id_ = id; }

  void Push(std::shared_ptr<const internal::ReplicaUpdate> update) override {
    std::lock_guard lock(mu_);
    if (finished_) return;
    // The token file changed: a revoked follower is cut off, as a watch
    // stream is (docs/SECURITY.md).
    if (!access_->StillAllowed(credentials_, Access::kRead, &generation_)) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                "credentials revoked"));
      return;
    }
    if (queue_.size() >= ReplicationService::kMaxQueuedUpdates) {
      FinishLocked(
          grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                       absl::StrCat("the follower fell ", queue_.size(),
                                    " updates behind; follow again")));
      return;
    }
    queue_.push_back(std::move(update));
    if (!writing_) WriteLocked();
  }

  void Refuse(grpc::Status status) {
    std::lock_guard lock(mu_);
    FinishLocked(std::move(status));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed"));
      return;
    }
    if (!finished_ && !queue_.empty()) WriteLocked();
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    if (id_ != 0) hub_->Detach(id_);
    metrics_->RecordRequest("Follow", final_code_, absl::Now() - start_);
    delete this;
  }

 private:
  void WriteLocked() {
    writing_ = true;
    StartWrite(queue_.front().get());
  }
  void FinishLocked(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    final_code_ = status.error_code();
    Finish(std::move(status));
  }

  ReplicationHub* hub_;
  Metrics* metrics_;
  const AccessControl* access_;
  AccessControl::Credentials credentials_;
  uint64_t generation_;
  absl::Time start_;
  uint64_t id_ = 0;
  std::mutex mu_;
  std::deque<std::shared_ptr<const internal::ReplicaUpdate>> queue_;
  bool writing_ = false;
  bool finished_ = false;
  grpc::StatusCode final_code_ = grpc::StatusCode::OK;
};

}  // namespace

grpc::ServerWriteReactor<internal::ReplicaUpdate>* ReplicationService::Follow(
    grpc::CallbackServerContext* ctx, const internal::FollowRequest*) {
  auto* stream =
      new FollowStream(hub_, metrics_, access_, AccessControl::Of(*ctx));
  if (grpc::Status denied = access_->Check(*ctx, "Follow", Access::kRead);
      !denied.ok()) {
    stream->Refuse(std::move(denied));
    return stream;
  }
  // Each follower holds a copy of the whole state while it starts: bounded.
  if (hub_->followers() >= max_streams_) {
    stream->Refuse(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("too many followers (", max_streams_,
                                  "); raise --max-follow-streams")));
    return stream;
  }
  uint64_t id = hub_->Expect();
  stream->set_id(id);
  // The snapshot is taken on the core thread and handed over when its
  // batch is released, after every batch before it: the batches after it
  // follow in order (ReplicationHub).
  bool posted = core_->Post(nullptr, [hub = hub_, id,
                                      stream](CoreLoop::Context& c) {
    std::shared_ptr<const internal::ReplicaUpdate> snapshot =
        ReplicaSnapshot(c.scheduler, c.cycle);
    c.Defer([hub, id, stream, snapshot] { hub->Attach(id, stream, snapshot); });
  });
  if (!posted) {
    stream->Refuse(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "the core's inbox is full; follow again"));
  }
  return stream;
}

ReadCache::ReadCache(CoreClient* core, Metrics* metrics, Options options)
    : core_(core), metrics_(metrics), options_(std::move(options)) {}

ReadCache::~ReadCache() { Stop(); }

void ReadCache::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "gs-read-cache");
    Run();
  });
}

void ReadCache::Stop() {
  {
    std::lock_guard lock(stream_mu_);
    stopping_ = true;
    if (stream_ != nullptr) stream_->TryCancel();
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ReadCache::Invalidate() {
  std::lock_guard lock(stream_mu_);
  if (stream_ != nullptr) stream_->TryCancel();
}

bool ReadCache::Read(int64_t min_revision,
                     absl::FunctionRef<void(const Scheduler&)> read) {
  std::shared_lock lock(mu_);
  if (!live_.load() || revision_.load() < min_revision) {
    if (!live_.load()) return false;
    // A write the caller just made is on its way: wait a little for it, on
    // this gRPC thread; only a few reads at a time, so callers asking for
    // revisions that never come cannot hold every thread (the others go
    // to the core at once).
    if (waiting_.fetch_add(1) >= kMaxWaiting) {
      waiting_.fetch_sub(1);
      return false;
    }
    absl::Time deadline = absl::Now() + options_.max_wait;
    applied_.wait_until(lock, absl::ToChronoTime(deadline), [&] {
      return !live_.load() || revision_.load() >= min_revision;
    });
    waiting_.fetch_sub(1);
    if (!live_.load() || revision_.load() < min_revision) return false;
  }
  read(*replica_);
  return true;
}

absl::Status ReadCache::Apply(const internal::ReplicaUpdate& update) {
  absl::StatusOr<ReplicaBatch> batch = DecodeReplicaUpdate(update);
  if (!batch.ok()) return batch.status();
  std::vector<PriorityClass> classes;
  for (const auto& c : update.classes()) classes.push_back(FromProto(c));
  std::vector<Topology> topologies;
  for (const auto& t : update.topologies()) topologies.push_back(FromProto(t));
  auto set_classes = [&](Scheduler& s) -> absl::Status {
    if (absl::Status t = s.SetTopologies(topologies); !t.ok()) return t;
    if (s.priority_classes() == classes &&
        s.default_priority_class() == update.default_class())
      return absl::OkStatus();
    return s.SetPriorityClasses(classes, update.default_class(),
                                ClassRemoval::kKeep);
  };
  if (update.snapshot()) {
    // Built aside, then swapped in: reads go on from the old one meanwhile.
    auto fresh = std::make_unique<Scheduler>();
    if (absl::Status s = set_classes(*fresh); !s.ok()) return s;
    if (absl::Status s = fresh->ApplyReplica(*batch); !s.ok()) return s;
    std::unique_lock lock(mu_);
    replica_ = std::move(fresh);
    // With the replica, under the lock: a reader never pairs this state
    // with another revision (after a wipe the new one is lower).
    revision_.store(update.revision());
    cycle_ = update.cycle();
    live_.store(true);
    metrics_->RecordReadCacheResync();
    LogLine(spdlog::level::info, "read cache follows the core")
        .Add("revision", update.revision())
        .Add("rows", static_cast<int64_t>(update.rows_size()));
  } else {
    std::unique_lock lock(mu_);
    if (!live_.load()) return absl::FailedPreconditionError("no snapshot");
    if (absl::Status s = set_classes(*replica_); !s.ok()) return s;
    if (absl::Status s = replica_->ApplyReplica(*batch); !s.ok()) {
      live_.store(false);
      return s;
    }
    revision_.store(update.revision());
    cycle_ = update.cycle();
  }
  applied_.notify_all();
  metrics_->RecordReadCache(true, update.revision());
  RefreshStatus(absl::Milliseconds(250));
  return absl::OkStatus();
}

void ReadCache::RefreshStatus(absl::Duration min_interval) {
  if (!options_.publish_status) return;
  std::lock_guard status_lock(status_mu_);
  absl::Time now = absl::Now();
  if (now - last_status_ < min_interval) return;
  std::shared_ptr<const StatusSnapshot> status;
  {
    // Shared: reads go on while the page is built.
    std::shared_lock lock(mu_);
    if (replica_ == nullptr) return;
    status =
        std::make_shared<StatusSnapshot>(BuildStatus(*replica_, now, cycle_));
  }
  last_status_ = now;
  options_.publish_status(std::move(status));
}

int64_t ReadCache::FollowOnce() {
  CoreClient::Target target = core_->Current();
  grpc::ClientContext ctx;
  if (!options_.authorization.empty())
    ctx.AddMetadata("authorization", options_.authorization);
  {
    std::lock_guard lock(stream_mu_);
    if (stopping_) return 0;
    stream_ = &ctx;
  }
  internal::FollowRequest request;
  std::unique_ptr<grpc::ClientReader<internal::ReplicaUpdate>> reader =
      target.replication->Follow(&ctx, request);
  internal::ReplicaUpdate update;
  absl::Status broken;
  int64_t followed = 0;  // updates applied on this stream
  while (reader->Read(&update)) {
    ++followed;
    if (broken = Apply(update); !broken.ok()) {
      ctx.TryCancel();
      while (reader->Read(&update)) {
      }
      break;
    }
  }
  grpc::Status status = reader->Finish();
  {
    std::lock_guard lock(stream_mu_);
    stream_ = nullptr;
  }
  {
    std::unique_lock lock(mu_);
    live_.store(false);
  }
  applied_.notify_all();
  metrics_->RecordReadCache(false, 0);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE)
    core_->Failed(target.index);
  // Once per kind of failure, not every retry (a core without the read
  // role for this frontend would fill the log every two seconds).
  std::string error =
      broken.ok() ? status.error_message() : std::string(broken.message());
  bool repeated = followed == 0 && error == last_error_;
  last_error_ = error;
  LogLine(repeated ? spdlog::level::debug : spdlog::level::warn,
          "read cache stopped following the core; reads go to the core")
      .Add("code", static_cast<int64_t>(status.error_code()))
      .Add("error", error)
      .Add("updates", followed);
  return followed;
}

void ReadCache::Run() {
  absl::Duration backoff = absl::Milliseconds(100);
  for (;;) {
    absl::Time started = absl::Now();
    int64_t followed = FollowOnce();
    // A stream that got its snapshot and lived a while was healthy: start over
    // quickly (a core restart, a failover). One that kept failing backs off
    // up to 30 s, since every new start costs the core a snapshot.
    if (followed > 0 && absl::Now() - started > absl::Seconds(5))
      backoff = absl::Milliseconds(100);
    std::unique_lock lock(stream_mu_);
    if (stop_cv_.wait_for(lock, absl::ToChronoNanoseconds(backoff),
                          [&] { return stopping_; }))
      return;
    backoff = std::min(backoff * 2, absl::Seconds(30));
  }
}

}  // namespace gangsched::server
