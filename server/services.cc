#include "server/services.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "openssl/sha.h"
#include "server/arena_allocator.h"
#include "server/convert.h"
#include "server/grpc_status.h"
#include "server/reads.h"

namespace gangsched::server {
namespace {

using Ctx = CoreLoop::Context;

using ApplyFn = std::function<void(Ctx&)>;
using ReplyFn = std::function<grpc::Status(Ctx&)>;

grpc::Status Invalid(const absl::Status& status) { return ToGrpc(status); }

// SHA-256 of a request's deterministic serialization (map entries sorted),
// kept with its answer: a request id used again with another request is
// told so instead of getting the first request's answer.
std::string RequestDigest(absl::string_view method,
                          const google::protobuf::Message& request) {
  // The method is part of the request: an id used for an Allocate is not
  // free for a Release.
  std::string bytes = absl::StrCat(method, "\n");
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&coded);
  }
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         md);
  return std::string(reinterpret_cast<const char*>(md), sizeof md);
}

// Hands one unary call to the core. `apply` (may be empty: a read) runs
// before the cycle, `reply` after it and returns the call's status. With a
// request id (`request` non-null), the first answer is remembered with the
// request's digest and replayed to retries; a different request under the
// same id gets INVALID_ARGUMENT.
template <typename Response>
grpc::ServerUnaryReactor* Dispatch(
    CoreLoop* core, Metrics* metrics, grpc::CallbackServerContext* ctx,
    absl::string_view method, const std::string& request_id, Response* response,
    ApplyFn apply, ReplyFn reply,
    const google::protobuf::Message* request = nullptr,
    bool read_only = false) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Time start = absl::Now();
  auto finish = [reactor, metrics, method, start](grpc::Status status) {
    metrics->RecordRequest(method, status.error_code(), absl::Now() - start);
    reactor->Finish(std::move(status));
  };
  struct Idempotency {
    std::shared_ptr<CachedReply> entry;
    bool replay = false;
    bool reused = false;  // the id answered a different request before
  };
  auto idem = std::make_shared<Idempotency>();
  std::string key = RequestKey(request_id);
  std::string digest =
      key.empty() || request == nullptr ? "" : RequestDigest(method, *request);

  ApplyFn wrapped_apply;
  if (apply) {
    wrapped_apply = [apply = std::move(apply), idem, key,
                     digest = std::move(digest)](Ctx& c) {
      if (!key.empty()) {
        auto [entry, existed] = c.idempotency.FindOrInsert(key);
        idem->entry = std::move(entry);
        idem->replay = existed;
        if (existed) {
          // Answers stored before digests were have none: replayed.
          idem->reused =
              !idem->entry->digest.empty() && idem->entry->digest != digest;
          return;
        }
        idem->entry->digest = digest;
      }
      apply(c);
    };
  }
  // The answer is computed after the cycle but sent only after the commit.
  auto wrapped_reply = [reply = std::move(reply), idem, response, finish,
                        request_id](Ctx& c) {
    if (idem->reused) {
      grpc::Status status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("request_id: \"", request_id,
                       "\" was already used for a different request; a "
                       "retry must repeat the request exactly, and a new "
                       "request needs a new request_id"));
      c.Defer([finish, status] { finish(status); });
      return;
    }
    if (idem->replay) {
      response->ParseFromString(idem->entry->response);
      grpc::Status status = idem->entry->status;
      c.Defer([finish, status] { finish(status); });
      return;
    }
    grpc::Status status = reply(c);
    if (idem->entry) {
      idem->entry->status = status;
      response->SerializeToString(&idem->entry->response);
    }
    c.Defer([finish, status] { finish(status); });
  };
  if (!core->Post(std::move(wrapped_apply), std::move(wrapped_reply),
                  read_only)) {
    finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "the scheduler's inbox is full; retry with backoff"));
  }
  return reactor;
}

// Finishes a call on the calling thread: one that failed validation at the
// edge, or a read answered off the core thread.
grpc::ServerUnaryReactor* FinishHere(Metrics* metrics,
                                     grpc::CallbackServerContext* ctx,
                                     absl::string_view method,
                                     grpc::Status status,
                                     absl::Duration latency) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  metrics->RecordRequest(method, status.error_code(), latency);
  reactor->Finish(std::move(status));
  return reactor;
}

grpc::ServerUnaryReactor* Reject(Metrics* metrics,
                                 grpc::CallbackServerContext* ctx,
                                 absl::string_view method,
                                 grpc::Status status) {
  return FinishHere(metrics, ctx, method, std::move(status),
                    absl::ZeroDuration());
}

// Who may call: checked before anything of the request is looked at
// (docs/SECURITY.md). `access`, `workload` and `queue` are expressions of
// the handler's request.
#define GANGSCHED_GUARD(method, access, workload, queue)         \
  if (grpc::Status denied =                                      \
          access_->Check(*ctx, method, access, workload, queue); \
      !denied.ok())                                              \
  return Reject(metrics_, ctx, method, std::move(denied))

// Dispatch for a mutating request that carries a request_id.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* DispatchWithId(CoreLoop* core, Metrics* metrics,
                                         grpc::CallbackServerContext* ctx,
                                         absl::string_view method,
                                         const Request* request,
                                         Response* response, ApplyFn apply,
                                         ReplyFn reply) {
  if (absl::Status s = CheckRequestId(request->request_id()); !s.ok())
    return Reject(metrics, ctx, method, ToGrpc(s));
  return Dispatch(core, metrics, ctx, method, request->request_id(), response,
                  std::move(apply), std::move(reply), request);
}

// A read: answered on this gRPC thread when the core allows it without
// waiting (CoreLoop::TryRead), else queued on the core like any request.
// `ready` (optional) says whether the state already has what the read needs,
// `prepare` (optional, core thread) provides it. The callables become
// std::functions (a heap allocation each) only when the read is queued.
template <typename Response, typename Read, typename Ready = std::nullptr_t,
          typename Prepare = std::nullptr_t>
grpc::ServerUnaryReactor* DispatchRead(CoreLoop* core, Metrics* metrics,
                                       grpc::CallbackServerContext* ctx,
                                       absl::string_view method,
                                       Response* response, Read read,
                                       Ready ready = nullptr,
                                       Prepare prepare = nullptr) {
  absl::Time start = absl::Now();
  grpc::Status status;
  if (core->TryRead([&](const Scheduler& s) {
        if constexpr (!std::is_null_pointer_v<Ready>) {
          if (!ready(s)) return false;
        }
        status = read(s);
        return true;
      })) {
    return FinishHere(metrics, ctx, method, std::move(status),
                      absl::Now() - start);
  }
  return Dispatch(
      core, metrics, ctx, method, "", response, nullptr,
      [read = std::move(read), prepare = std::move(prepare)](Ctx& c) mutable {
        if constexpr (!std::is_null_pointer_v<Prepare>) {
          prepare(c.scheduler);
        }
        return read(c.scheduler);
      });
}

template <typename Response>
void FillNodeAnswer(const NodeChangeAnswer& answer, Response* response) {
  for (const auto& name : answer.accepted) response->add_accepted(name);
  for (const auto& [name, why] : answer.rejected) {
    auto* r = response->add_rejected();
    r->set_name(name);
    r->set_reason(why);
  }
}

// Streams events from the EventLog. Woken by the log after each cycle, by
// the heartbeat ticker and by gRPC after each write; one write in flight at
// a time. A HEARTBEAT opens the stream and is sent again whenever nothing
// was written for `heartbeat`, with the stream's position as its revision.
// A reader that falls more than `limits.max_lag_events` behind the newest
// event is dropped with RESOURCE_EXHAUSTED (docs/SECURITY.md, overload), so
// a stream that is never read holds at most one batch, and not for long.
class WatchReactor final : public grpc::ServerWriteReactor<v1::Event> {
 public:
  WatchReactor(EventLog* log, Metrics* metrics,
               grpc::CallbackServerContext* ctx,
               const v1::WatchRequest& request, absl::Duration heartbeat,
               const WatchLimits& limits, std::atomic<int64_t>* open,
               const AccessControl* access)
      : log_(log),
        metrics_(metrics),
        ctx_(ctx),
        access_(access),
        credentials_(AccessControl::Of(*ctx)),
        generation_(access->generation()),
        filter_(request.workload_id()),
        heartbeat_(heartbeat),
        max_lag_(limits.max_lag_events),
        open_(open),
        start_(absl::Now()) {
    std::lock_guard lock(mu_);
    if (open_->fetch_add(1) >= limits.max_streams) {
      metrics_->RecordWatchDropped("too_many");
      FinishLocked(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("too many WatchEvents streams (", limits.max_streams,
                       " open); close some, or raise --max-watch-streams")));
      return;
    }
    if (absl::Status s = ValidateRequest(request); !s.ok()) {
      FinishLocked(ToGrpc(s));
      return;
    }
    int64_t last = log->last_revision();
    if (request.from_revision() > last) {
      // Resuming past the end would silently skip whatever the server
      // decides up to that revision: it was wiped, restored or ephemeral.
      FinishLocked(grpc::Status(
          grpc::StatusCode::OUT_OF_RANGE,
          absl::StrCat("from_revision: revision ", request.from_revision(),
                       " is newer than the server's (", last,
                       "): its state was wiped or restored; resync with "
                       "ListWorkloads and watch from its revision")));
      return;
    }
    after_ = request.from_revision() == 0 ? last : request.from_revision();
    std::vector<v1::Event> none;
    int64_t scanned = after_;
    if (log->Read(after_, filter_, 0, &none, &scanned) ==
        EventLog::ReadStatus::kTooOld) {
      FinishLocked(grpc::Status(
          grpc::StatusCode::OUT_OF_RANGE,
          absl::StrCat("from_revision: revision ", after_,
                       " is older than the retained event window; resync with "
                       "ListWorkloads and watch from its revision")));
      return;
    }
    heartbeat_due_ = true;  // the stream opens with one
    listener_ = log->AddListener([this] { Pump(); });
    PumpLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed"));
      return;
    }
    PumpLocked();
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    if (listener_ != 0) log_->RemoveListener(listener_);
    open_->fetch_sub(1);
    metrics_->RecordRequest("WatchEvents", final_code_, absl::Now() - start_);
    delete this;
  }

 private:
  void Pump() {
    std::lock_guard lock(mu_);
    PumpLocked();
  }

  void PumpLocked() {
    if (finished_) {
      // A finished stream whose last write never completes (nobody reads
      // it) is cancelled, which frees it, after a grace period.
      if (writing_ && !cancelled_ &&
          absl::Now() - finished_at_ > absl::Seconds(5)) {
        cancelled_ = true;
        ctx_->TryCancel();
      }
      return;
    }
    // The token file changed: a revoked caller's stream ends too.
    if (!access_->StillAllowed(credentials_, Access::kRead, &generation_)) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                "credentials revoked"));
      return;
    }
    if (writing_) {
      int64_t lag = log_->last_revision() - written_;
      if (lag > max_lag_) {
        metrics_->RecordWatchDropped("slow");
        FinishLocked(
            grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                         absl::StrCat("the reader fell ", lag,
                                      " events behind (more than ", max_lag_,
                                      "): read faster, or resume with "
                                      "from_revision ",
                                      written_)));
      }
      return;
    }
    if (buffer_.empty()) {
      std::vector<v1::Event> batch;
      if (log_->Read(after_, filter_, 64, &batch, &after_) ==
          EventLog::ReadStatus::kTooOld) {
        FinishLocked(
            grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                         "the watcher fell behind the retained event window; "
                         "resync with ListWorkloads"));
        return;
      }
      for (auto& e : batch) buffer_.push_back(std::move(e));
    }
    absl::Time now = absl::Now();
    if (heartbeat_due_ ||
        (buffer_.empty() && now - last_write_ >= heartbeat_)) {
      // Everything up to after_ was delivered or filtered out: a client
      // may resume from this revision.
      heartbeat_due_ = false;
      current_.Clear();
      current_.set_type(v1::EVENT_TYPE_HEARTBEAT);
      current_.set_revision(buffer_.empty() ? after_
                                            : buffer_.front().revision() - 1);
      ToProto(now, current_.mutable_time());
    } else if (!buffer_.empty()) {
      current_ = std::move(buffer_.front());
      buffer_.pop_front();
    } else {
      return;
    }
    last_write_ = now;
    writing_ = true;
    written_ = current_.type() == v1::EVENT_TYPE_HEARTBEAT
                   ? current_.revision()
                   : current_.revision() - 1;
    StartWrite(&current_);
  }

  void FinishLocked(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    finished_at_ = absl::Now();
    final_code_ = status.error_code();
    Finish(std::move(status));
  }

  EventLog* log_;
  Metrics* metrics_;
  grpc::CallbackServerContext* ctx_;
  const AccessControl* access_;
  AccessControl::Credentials credentials_;
  uint64_t generation_;
  std::string filter_;
  absl::Duration heartbeat_;
  int64_t max_lag_;
  std::atomic<int64_t>* open_;
  absl::Time start_;
  absl::Time finished_at_;
  bool cancelled_ = false;
  int64_t written_ = 0;  // every event up to here was handed to gRPC
  uint64_t listener_ = 0;
  std::mutex mu_;
  int64_t after_ = 0;
  std::deque<v1::Event> buffer_;
  v1::Event current_;
  bool writing_ = false;
  bool finished_ = false;
  bool heartbeat_due_ = false;
  absl::Time last_write_ = absl::InfinitePast();
  grpc::StatusCode final_code_ = grpc::StatusCode::OK;
};

}  // namespace

// ---------------------------------------------------------------------------
// Scheduler service

SchedulerService::SchedulerService(CoreLoop* core, EventLog* events,
                                   Metrics* metrics, SpecCache* specs,
                                   const AccessControl* access,
                                   absl::Duration heartbeat,
                                   WatchLimits watch_limits,
                                   DryRunLimits dry_run_limits)
    : core_(core),
      events_(events),
      metrics_(metrics),
      specs_(specs),
      access_(access),
      heartbeat_(heartbeat),
      watch_limits_(watch_limits),
      dry_run_limits_(dry_run_limits),
      dry_run_workers_(
          static_cast<int>(std::thread::hardware_concurrency() / 2),
          "gs-dry-run") {
  absl::Duration tick =
      std::clamp(heartbeat_ / 4, absl::Milliseconds(10), absl::Seconds(1));
  ticker_ = std::thread([this, tick] {
    std::unique_lock lock(ticker_mu_);
    while (!ticker_cv_.wait_for(lock, absl::ToChronoNanoseconds(tick),
                                [this] { return ticker_stop_; })) {
      lock.unlock();
      events_->Wake();
      lock.lock();
    }
  });
  GANGSCHED_ARENA(Allocate, AllocateRequest, AllocateResponse);
  GANGSCHED_ARENA(Release, ReleaseRequest, ReleaseResponse);
  GANGSCHED_ARENA(Preempt, PreemptRequest, PreemptResponse);
  GANGSCHED_ARENA(UpsertNodes, UpsertNodesRequest, UpsertNodesResponse);
  GANGSCHED_ARENA(RemoveNodes, RemoveNodesRequest, RemoveNodesResponse);
  GANGSCHED_ARENA(SyncNodes, SyncNodesRequest, SyncNodesResponse);
  GANGSCHED_ARENA(GetWorkload, GetWorkloadRequest, WorkloadStatus);
  GANGSCHED_ARENA(ListWorkloads, ListWorkloadsRequest, ListWorkloadsResponse);
  GANGSCHED_ARENA(Explain, ExplainRequest, ExplainResponse);
}

grpc::ServerUnaryReactor* SchedulerService::Allocate(
    grpc::CallbackServerContext* ctx, const v1::AllocateRequest* request,
    v1::AllocateResponse* response) {
  GANGSCHED_GUARD("Allocate",
                  request->dry_run() ? Access::kRead : Access::kSchedule,
                  request->workload().id(), {});
  auto parsed = ParseAllocateRequest(*request);
  if (!parsed.ok())
    return Reject(metrics_, ctx, "Allocate", Invalid(parsed.status()));
  if (request->dry_run()) {
    // A dry run is not an idempotent write: it is never recorded under its
    // request_id nor answered from it, but the id must still be a valid one.
    if (absl::Status s = CheckRequestId(request->request_id()); !s.ok())
      return Reject(metrics_, ctx, "Allocate", ToGrpc(s));
    // The dry run decides on its own copy of the state (Scheduler::Fork).
    auto dry = std::make_shared<AllocateParsed>(*std::move(parsed));
    auto decide = [this, dry, response](Scheduler& fork) {
      auto answer = fork.DecideDryRun(dry->spec, dry->what_if, core_->Now());
      if (!answer.ok()) return ToGrpc(answer.status());
      ToProto(*answer, response);
      return grpc::Status::OK;
    };
    return DecideOnFork(ctx, "Allocate", std::move(decide));
  }
  auto shared = std::make_shared<WorkloadSpec>(std::move(parsed->spec));
  auto applied = std::make_shared<absl::Status>();
  return DispatchWithId(
      core_, metrics_, ctx, "Allocate", request, response,
      [shared, applied](Ctx& c) {
        *applied = c.scheduler.Submit(*shared, c.now);
      },
      [shared, applied, response](Ctx& c) {
        if (!applied->ok()) return ToGrpc(*applied);
        auto answer = c.scheduler.Answer(shared->id);
        if (!answer.ok()) {
          // Submitted, then released and forgotten by later requests of the
          // same batch (its queue deleted): it was taken in and is gone.
          response->set_workload_id(shared->id);
          response->set_state(v1::WORKLOAD_STATE_RELEASED);
          response->set_revision(c.scheduler.revision());
          return grpc::Status::OK;
        }
        ToProto(*answer, response);
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::Release(
    grpc::CallbackServerContext* ctx, const v1::ReleaseRequest* request,
    v1::ReleaseResponse* response) {
  GANGSCHED_GUARD("Release", Access::kSchedule, request->workload_id(), {});
  if (auto s = CheckName(request->workload_id(), "workload_id"); !s.ok()) {
    return Reject(metrics_, ctx, "Release", Invalid(s));
  }
  auto slots = ParseSlots(request->slots());
  if (!slots.ok())
    return Reject(metrics_, ctx, "Release", Invalid(slots.status()));
  struct State {
    std::string id;
    std::vector<SlotRef> slots;
    bool shrink;
    absl::StatusOr<ReleaseAnswer> answer;
  };
  auto state =
      std::make_shared<State>(State{request->workload_id(), *std::move(slots),
                                    request->shrink(), ReleaseAnswer{}});
  return DispatchWithId(
      core_, metrics_, ctx, "Release", request, response,
      [state](Ctx& c) {
        state->answer =
            c.scheduler.Release(state->id, state->slots, state->shrink, c.now);
      },
      [state, response](Ctx& c) {
        if (!state->answer.ok()) return ToGrpc(state->answer.status());
        response->set_workload_id(state->answer->workload_id);
        const Workload* w = c.scheduler.FindWorkload(state->id);
        response->set_state(ToProto(w ? w->state : state->answer->state));
        for (const auto& s : state->answer->released)
          ToProto(s, response->add_released_slots());
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::DecideOnFork(
    grpc::CallbackServerContext* ctx, absl::string_view method,
    std::function<grpc::Status(Scheduler&)> decide) {
  // On this gRPC thread when the core allows it, which costs the core
  // nothing: the state is held only while the fork is made, and the
  // decision (a whole cycle, what_if included) runs on the fork with no
  // lock held, while the core goes on.
  const absl::Time start = absl::Now();
  std::unique_ptr<Scheduler> fork;
  if (core_->TryRead([&](const Scheduler& s) {
        fork = s.Fork();
        return true;
      })) {
    grpc::Status status = decide(*fork);
    fork.reset();
    return FinishHere(metrics_, ctx, method, std::move(status),
                      absl::Now() - start);
  }
  // Else the core makes the fork when it comes to it, behind the writes
  // already queued, and a worker decides on it: the core spends only the
  // fork's microseconds on it, whatever the what-if. At most --max-dry-runs
  // wait or decide so at once.
  if (queued_dry_runs_.fetch_add(1) >= dry_run_limits_.max_queued) {
    queued_dry_runs_.fetch_sub(1);
    return Reject(
        metrics_, ctx, method,
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat(method == "Allocate" ? "dry_run" : method,
                                  ": the scheduler is busy and ",
                                  dry_run_limits_.max_queued,
                                  " dry runs and explanations already wait "
                                  "for it (--max-dry-runs); retry shortly")));
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto decide_on_worker = [this, decide = std::move(decide), reactor, start,
                           method](std::shared_ptr<Scheduler> fork) {
    dry_run_workers_.Run([this, decide, reactor, start, method,
                          fork]() mutable {
      grpc::Status status = decide(*fork);
      fork.reset();
      queued_dry_runs_.fetch_sub(1);
      metrics_->RecordRequest(method, status.error_code(), absl::Now() - start);
      reactor->Finish(std::move(status));
    });
  };
  // The fork only reads (Fork is const): the core makes it under the
  // shared lock beside the reads on gRPC threads (CoreLoop::Post's
  // `read_only`), and hands it over once the batch is released.
  if (!core_->Post(
          nullptr,
          [decide_on_worker](Ctx& c) {
            std::shared_ptr<Scheduler> fork = std::as_const(c.scheduler).Fork();
            c.Defer([decide_on_worker, fork] { decide_on_worker(fork); });
          },
          /*read_only=*/true)) {
    queued_dry_runs_.fetch_sub(1);
    metrics_->RecordRequest(method, grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::Now() - start);
    reactor->Finish(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "the scheduler's inbox is full; retry with backoff"));
  }
  return reactor;
}

grpc::ServerUnaryReactor* SchedulerService::Preempt(
    grpc::CallbackServerContext* ctx, const v1::PreemptRequest* request,
    v1::PreemptResponse* response) {
  GANGSCHED_GUARD("Preempt",
                  request->dry_run() ? Access::kRead : Access::kSchedule,
                  request->workload_id(), {});
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "Preempt", Invalid(s));
  }
  PreemptScope scope = request->scope() == v1::PREEMPT_SCOPE_WHOLE
                           ? PreemptScope::kWhole
                           : PreemptScope::kElasticOnly;
  struct State {
    std::string id;
    PreemptScope scope;
    bool requeue;
    bool dry_run;
    absl::StatusOr<std::vector<Eviction>> evictions;
  };
  auto state = std::make_shared<State>(
      State{request->workload_id(), scope, request->requeue(),
            request->dry_run(), std::vector<Eviction>{}});
  auto run = [state](Ctx& c) {
    state->evictions = c.scheduler.Preempt(
        state->id, state->scope, state->requeue, state->dry_run, c.now);
  };
  auto reply = [state, response](Ctx& c) {
    if (!state->evictions.ok()) return ToGrpc(state->evictions.status());
    for (const auto& e : *state->evictions)
      ToProto(e, response->add_evictions());
    response->set_revision(c.scheduler.revision());
    if (!state->dry_run) {
      // Gone altogether only if it was released and then forgotten.
      const Workload* w = c.scheduler.FindWorkload(state->id);
      response->set_state(w ? ToProto(w->state) : v1::WORKLOAD_STATE_RELEASED);
    }
    return grpc::Status::OK;
  };
  if (request->dry_run()) {
    // A what-if is a read: it runs in the reply phase and commits nothing.
    return Dispatch(core_, metrics_, ctx, "Preempt", "", response, nullptr,
                    [run, reply](Ctx& c) {
                      run(c);
                      return reply(c);
                    });
  }
  return DispatchWithId(core_, metrics_, ctx, "Preempt", request, response, run,
                        reply);
}

grpc::ServerWriteReactor<v1::Event>* SchedulerService::WatchEvents(
    grpc::CallbackServerContext* ctx, const v1::WatchRequest* request) {
  if (grpc::Status denied = access_->Check(*ctx, "WatchEvents", Access::kRead);
      !denied.ok()) {
    return RefuseWatch(metrics_, std::move(denied));
  }
  return new WatchReactor(events_, metrics_, ctx, *request, heartbeat_,
                          watch_limits_, &open_watches_, access_);
}

namespace {

// A stream refused before it starts (bad input, credentials, too many).
class RefusedWatch final : public grpc::ServerWriteReactor<v1::Event> {
 public:
  RefusedWatch(Metrics* metrics, grpc::Status status) : metrics_(metrics) {
    metrics_->RecordRequest("WatchEvents", status.error_code(),
                            absl::ZeroDuration());
    Finish(std::move(status));
  }
  void OnDone() override { delete this; }

 private:
  Metrics* metrics_;
};

}  // namespace

grpc::ServerWriteReactor<v1::Event>* RefuseWatch(Metrics* metrics,
                                                 grpc::Status status) {
  return new RefusedWatch(metrics, std::move(status));
}

SchedulerService::~SchedulerService() {
  {
    std::lock_guard lock(ticker_mu_);
    ticker_stop_ = true;
  }
  ticker_cv_.notify_all();
  ticker_.join();
}

grpc::ServerUnaryReactor* SchedulerService::UpsertNodes(
    grpc::CallbackServerContext* ctx, const v1::UpsertNodesRequest* request,
    v1::UpsertNodesResponse* response) {
  GANGSCHED_GUARD("UpsertNodes", Access::kSchedule, {}, {});
  // All or nothing, like SyncNodes: one invalid node fails the request.
  auto parsed = ParseNodeList(request->nodes());
  if (!parsed.ok())
    return Reject(metrics_, ctx, "UpsertNodes", Invalid(parsed.status()));
  auto nodes = std::make_shared<std::vector<NodeSpec>>(*std::move(parsed));
  auto answer = std::make_shared<NodeChangeAnswer>();
  auto applied = std::make_shared<absl::Status>();
  return DispatchWithId(
      core_, metrics_, ctx, "UpsertNodes", request, response,
      [nodes, answer, applied](Ctx& c) {
        *applied = c.scheduler.CheckResourceNames(*nodes);
        if (applied->ok()) *answer = c.scheduler.UpsertNodes(*nodes, c.now);
      },
      [answer, applied, response](Ctx& c) {
        if (!applied->ok()) return ToGrpc(*applied);
        FillNodeAnswer(*answer, response);
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::RemoveNodes(
    grpc::CallbackServerContext* ctx, const v1::RemoveNodesRequest* request,
    v1::RemoveNodesResponse* response) {
  GANGSCHED_GUARD("RemoveNodes", Access::kSchedule, {}, {});
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "RemoveNodes", Invalid(s));
  }
  auto names = std::make_shared<std::vector<std::string>>(
      request->names().begin(), request->names().end());
  auto answer = std::make_shared<NodeChangeAnswer>();
  return DispatchWithId(
      core_, metrics_, ctx, "RemoveNodes", request, response,
      [names, answer](Ctx& c) {
        *answer = c.scheduler.RemoveNodes(*names, c.now);
      },
      [answer, response](Ctx& c) {
        for (const auto& n : answer->removed) response->add_removed(n);
        for (const auto& n : answer->not_found) response->add_not_found(n);
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::SyncNodes(
    grpc::CallbackServerContext* ctx, const v1::SyncNodesRequest* request,
    v1::SyncNodesResponse* response) {
  GANGSCHED_GUARD("SyncNodes", Access::kSchedule, {}, {});
  auto parsed = ParseNodeList(request->nodes());
  if (!parsed.ok())
    return Reject(metrics_, ctx, "SyncNodes", Invalid(parsed.status()));
  auto nodes = std::make_shared<std::vector<NodeSpec>>(*std::move(parsed));
  auto answer = std::make_shared<NodeChangeAnswer>();
  auto applied = std::make_shared<absl::Status>();
  return DispatchWithId(
      core_, metrics_, ctx, "SyncNodes", request, response,
      [nodes, answer, applied](Ctx& c) {
        *applied = c.scheduler.CheckResourceNames(*nodes);
        if (applied->ok()) *answer = c.scheduler.SyncNodes(*nodes, c.now);
      },
      [answer, applied, response](Ctx& c) {
        if (!applied->ok()) return ToGrpc(*applied);
        FillNodeAnswer(*answer, response);
        for (const auto& n : answer->removed) response->add_removed(n);
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::GetWorkload(
    grpc::CallbackServerContext* ctx, const v1::GetWorkloadRequest* request,
    v1::WorkloadStatus* response) {
  GANGSCHED_GUARD("GetWorkload", Access::kRead, {}, {});
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "GetWorkload", Invalid(s));
  }
  std::string id = request->workload_id();
  int64_t min_revision = request->min_revision();
  return DispatchRead(
      core_, metrics_, ctx, "GetWorkload", response,
      [id, min_revision, response, specs = specs_](const Scheduler& s) {
        if (grpc::Status st = CheckMinRevision(s, min_revision); !st.ok())
          return st;
        return ReadWorkload(s, *specs, id, response);
      });
}

grpc::ServerUnaryReactor* SchedulerService::ListWorkloads(
    grpc::CallbackServerContext* ctx, const v1::ListWorkloadsRequest* request,
    v1::ListWorkloadsResponse* response) {
  GANGSCHED_GUARD("ListWorkloads", Access::kRead, {}, {});
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "ListWorkloads", Invalid(s));
  }
  return DispatchRead(
      core_, metrics_, ctx, "ListWorkloads", response,
      [request = *request, response, specs = specs_](const Scheduler& s) {
        if (grpc::Status st = CheckMinRevision(s, request.min_revision());
            !st.ok())
          return st;
        return ReadWorkloads(s, *specs, request, response);
      });
}

grpc::ServerUnaryReactor* SchedulerService::Explain(
    grpc::CallbackServerContext* ctx, const v1::ExplainRequest* request,
    v1::ExplainResponse* response) {
  GANGSCHED_GUARD("Explain", Access::kRead, {}, {});
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "Explain", Invalid(s));
  }
  std::string id = request->workload_id();
  // Explain runs the next cycle on a fork and words what it decides for the
  // workload (Scheduler::Explain): decided off the core, as a dry run is.
  return DecideOnFork(ctx, "Explain", [this, id, response](Scheduler& fork) {
    const absl::Time now = core_->Now();
    auto answer = fork.DecideExplain(id, now);
    if (!answer.ok()) return ToGrpc(answer.status());
    response->set_workload_id(answer->workload_id);
    response->set_state(ToProto(answer->state));
    if (answer->pending.code != PendingCode::kNone) {
      ToProto(answer->pending, response->mutable_pending());
    }
    response->set_text(answer->text);
    for (const QueueCheck& check : answer->queue_checks) {
      QuantityScale scale = ScaleFor(check.resource);
      auto fmt = [&](int64_t v) {
        return v == kUnlimited ? std::string("-1") : FormatQuantity(v, scale);
      };
      auto* out = response->add_queue_checks();
      out->set_queue(check.queue);
      out->set_resource(check.resource);
      out->set_quota(fmt(check.quota));
      out->set_limit(fmt(check.limit));
      out->set_allocated(fmt(check.allocated));
      out->set_request(fmt(check.request));
      out->set_fair_share(fmt(check.fair_share));
      out->set_ok(check.ok);
      out->set_message(check.message);
    }
    for (const auto& [reason, count] : answer->node_rejections) {
      auto* out = response->add_node_rejections();
      out->set_reason(reason);
      out->set_count(count);
    }
    for (const auto& e : answer->would_evict)
      ToProto(e, response->add_would_evict());
    ToProto(now, response->mutable_time());
    return grpc::Status::OK;
  });
}

// ---------------------------------------------------------------------------
// Admin service

AdminService::AdminService(CoreLoop* core, Metrics* metrics, SpecCache* specs,
                           const AccessControl* access)
    : core_(core), metrics_(metrics), specs_(specs), access_(access) {
  GANGSCHED_ARENA(UpsertQueue, UpsertQueueRequest, UpsertQueueResponse);
  GANGSCHED_ARENA(DeleteQueue, DeleteQueueRequest, DeleteQueueResponse);
  GANGSCHED_ARENA(ListQueues, ListQueuesRequest, ListQueuesResponse);
  GANGSCHED_ARENA(GetPriorityClasses, GetPriorityClassesRequest,
                  GetPriorityClassesResponse);
  GANGSCHED_ARENA(GetClusterSnapshot, GetClusterSnapshotRequest,
                  ClusterSnapshot);
}

grpc::ServerUnaryReactor* AdminService::UpsertQueue(
    grpc::CallbackServerContext* ctx, const v1::UpsertQueueRequest* request,
    v1::UpsertQueueResponse* response) {
  GANGSCHED_GUARD("UpsertQueue", Access::kAdmin, {}, request->queue().name());
  auto spec = ParseQueue(request->queue());
  if (!spec.ok())
    return Reject(metrics_, ctx, "UpsertQueue", Invalid(spec.status()));
  auto shared = std::make_shared<QueueSpec>(*std::move(spec));
  auto applied = std::make_shared<absl::Status>();
  return DispatchWithId(
      core_, metrics_, ctx, "UpsertQueue", request, response,
      [shared, applied](Ctx& c) {
        *applied = c.scheduler.UpsertQueue(*shared).status();
      },
      [shared, applied, response](Ctx& c) {
        if (!applied->ok()) return ToGrpc(*applied);
        // A DeleteQueue later in the same batch may have removed it: the
        // upsert still happened, and its answer is the spec it applied.
        if (const Queue* q = c.scheduler.FindQueue(shared->name)) {
          QueueToProto(c.scheduler, *q, response->mutable_queue());
        } else {
          ToProto(*shared, response->mutable_queue()->mutable_queue());
        }
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* AdminService::DeleteQueue(
    grpc::CallbackServerContext* ctx, const v1::DeleteQueueRequest* request,
    v1::DeleteQueueResponse* response) {
  GANGSCHED_GUARD("DeleteQueue", Access::kAdmin, {}, request->name());
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "DeleteQueue", Invalid(s));
  }
  std::string name = request->name();
  auto applied = std::make_shared<absl::Status>();
  return DispatchWithId(
      core_, metrics_, ctx, "DeleteQueue", request, response,
      [name, applied](Ctx& c) { *applied = c.scheduler.DeleteQueue(name); },
      [applied, response](Ctx& c) {
        if (!applied->ok()) return ToGrpc(*applied);
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* AdminService::ListQueues(
    grpc::CallbackServerContext* ctx, const v1::ListQueuesRequest* request,
    v1::ListQueuesResponse* response) {
  GANGSCHED_GUARD("ListQueues", Access::kRead, {}, {});
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "ListQueues", Invalid(s));
  }
  int64_t min_revision = request->min_revision();
  return DispatchRead(core_, metrics_, ctx, "ListQueues", response,
                      [min_revision, response](const Scheduler& s) {
                        if (grpc::Status st = CheckMinRevision(s, min_revision);
                            !st.ok())
                          return st;
                        return ReadQueues(s, response);
                      });
}

grpc::ServerUnaryReactor* AdminService::GetPriorityClasses(
    grpc::CallbackServerContext* ctx, const v1::GetPriorityClassesRequest*,
    v1::GetPriorityClassesResponse* response) {
  GANGSCHED_GUARD("GetPriorityClasses", Access::kRead, {}, {});
  return DispatchRead(core_, metrics_, ctx, "GetPriorityClasses", response,
                      [response](const Scheduler& s) {
                        return ReadPriorityClasses(s, response);
                      });
}

grpc::ServerUnaryReactor* AdminService::GetClusterSnapshot(
    grpc::CallbackServerContext* ctx,
    const v1::GetClusterSnapshotRequest* request,
    v1::ClusterSnapshot* response) {
  GANGSCHED_GUARD("GetClusterSnapshot", Access::kRead, {}, {});
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "GetClusterSnapshot", Invalid(s));
  }
  int64_t min_revision = request->min_revision();
  return DispatchRead(
      core_, metrics_, ctx, "GetClusterSnapshot", response,
      [min_revision, response, specs = specs_](const Scheduler& s) {
        if (grpc::Status st = CheckMinRevision(s, min_revision); !st.ok())
          return st;
        return ReadClusterSnapshot(s, *specs, response);
      });
}

}  // namespace gangsched::server
