#include "server/services.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <mutex>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "server/arena_allocator.h"
#include "server/convert.h"

namespace gangsched::server {
namespace {

using Ctx = CoreLoop::Context;
using ApplyFn = std::function<void(Ctx&)>;
using ReplyFn = std::function<grpc::Status(Ctx&)>;

grpc::Status Invalid(const absl::Status& status) { return ToGrpc(status); }

// Hands one unary call to the core. `apply` (may be empty: a read) runs
// before the cycle, `reply` after it and returns the call's status. With a
// request id, the first answer is remembered and replayed to retries.
template <typename Response>
grpc::ServerUnaryReactor* Dispatch(CoreLoop* core, Metrics* metrics,
                                   grpc::CallbackServerContext* ctx,
                                   absl::string_view method,
                                   const std::string& request_id,
                                   Response* response, ApplyFn apply,
                                   ReplyFn reply) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Time start = absl::Now();
  auto finish = [reactor, metrics, method, start](grpc::Status status) {
    metrics->RecordRequest(method, status.error_code(), absl::Now() - start);
    reactor->Finish(std::move(status));
  };
  struct Idempotency {
    std::shared_ptr<CachedReply> entry;
    bool replay = false;
  };
  auto idem = std::make_shared<Idempotency>();
  std::string key =
      request_id.empty() ? "" : absl::StrCat(method, "/", request_id);

  ApplyFn wrapped_apply;
  if (apply) {
    wrapped_apply = [apply = std::move(apply), idem, key](Ctx& c) {
      if (!key.empty()) {
        auto [entry, existed] = c.idempotency.FindOrInsert(key);
        idem->entry = std::move(entry);
        idem->replay = existed;
        if (existed) return;
      }
      apply(c);
    };
  }
  // The answer is computed after the cycle but sent only after the commit.
  auto wrapped_reply = [reply = std::move(reply), idem, response,
                        finish](Ctx& c) {
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
  if (!core->Post(std::move(wrapped_apply), std::move(wrapped_reply))) {
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

// Pointers to the live items (queues, nodes), sorted by name.
template <typename T, typename Name>
std::vector<const T*> LiveByName(const std::vector<T>& items, Name name) {
  std::vector<const T*> out;
  for (const T& item : items) {
    if (item.live) out.push_back(&item);
  }
  std::sort(out.begin(), out.end(),
            [&](const T* a, const T* b) { return name(*a) < name(*b); });
  return out;
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

// Parses every node; the first invalid one fails the whole request when
// `all_or_nothing`, else it is reported as rejected.
struct ParsedNodes {
  std::vector<NodeSpec> valid;
  std::vector<std::pair<std::string, std::string>> rejected;
};
absl::StatusOr<ParsedNodes> ParseNodes(
    const google::protobuf::RepeatedPtrField<v1::Node>& nodes,
    bool all_or_nothing) {
  ParsedNodes out;
  absl::flat_hash_map<std::string, bool> seen;
  for (int i = 0; i < nodes.size(); ++i) {
    std::string field = absl::StrCat("nodes[", i, "]");
    absl::StatusOr<NodeSpec> node = ParseNode(nodes[i], field);
    if (node.ok() && !seen.emplace(node->name, true).second) {
      node = absl::InvalidArgumentError(absl::StrCat(
          field, ".name: duplicate node \"", node->name, "\" in the request"));
    }
    if (!node.ok()) {
      if (all_or_nothing) return node.status();
      out.rejected.emplace_back(nodes[i].name(),
                                std::string(node.status().message()));
      continue;
    }
    out.valid.push_back(*std::move(node));
  }
  return out;
}

template <typename Response>
void FillNodeAnswer(
    const NodeChangeAnswer& answer,
    const std::vector<std::pair<std::string, std::string>>& edge_rejected,
    Response* response) {
  for (const auto& name : answer.accepted) response->add_accepted(name);
  for (const auto& [name, why] : edge_rejected) {
    auto* r = response->add_rejected();
    r->set_name(name);
    r->set_reason(why);
  }
  for (const auto& [name, why] : answer.rejected) {
    auto* r = response->add_rejected();
    r->set_name(name);
    r->set_reason(why);
  }
}

// Streams events from the EventLog. Woken by the log after each cycle and by
// gRPC after each write; one write in flight at a time.
class WatchReactor final : public grpc::ServerWriteReactor<v1::Event> {
 public:
  WatchReactor(EventLog* log, Metrics* metrics, const v1::WatchRequest& request)
      : log_(log),
        metrics_(metrics),
        filter_(request.workload_id()),
        start_(absl::Now()) {
    after_ = request.from_revision() <= 0 ? log->last_revision()
                                          : request.from_revision();
    std::vector<v1::Event> none;
    int64_t scanned = after_;
    if (log->Read(after_, filter_, 0, &none, &scanned) ==
        EventLog::ReadStatus::kTooOld) {
      std::lock_guard lock(mu_);
      FinishLocked(grpc::Status(
          grpc::StatusCode::OUT_OF_RANGE,
          absl::StrCat("from_revision: revision ", after_,
                       " is older than the retained event window; resync with "
                       "ListWorkloads and watch from its revision")));
      return;
    }
    listener_ = log->AddListener([this] { Pump(); });
    Pump();
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
    metrics_->RecordRequest("WatchEvents", final_code_, absl::Now() - start_);
    delete this;
  }

 private:
  void Pump() {
    std::lock_guard lock(mu_);
    PumpLocked();
  }

  void PumpLocked() {
    if (writing_ || finished_) return;
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
    if (buffer_.empty()) return;
    current_ = std::move(buffer_.front());
    buffer_.pop_front();
    writing_ = true;
    StartWrite(&current_);
  }

  void FinishLocked(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    final_code_ = status.error_code();
    Finish(std::move(status));
  }

  EventLog* log_;
  Metrics* metrics_;
  std::string filter_;
  absl::Time start_;
  uint64_t listener_ = 0;
  std::mutex mu_;
  int64_t after_ = 0;
  std::deque<v1::Event> buffer_;
  v1::Event current_;
  bool writing_ = false;
  bool finished_ = false;
  grpc::StatusCode final_code_ = grpc::StatusCode::OK;
};

}  // namespace

// ---------------------------------------------------------------------------
// Scheduler service

SchedulerService::SchedulerService(CoreLoop* core, EventLog* events,
                                   Metrics* metrics, SpecCache* specs)
    : core_(core), events_(events), metrics_(metrics), specs_(specs) {
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
  auto spec = ParseWorkloadSpec(request->workload());
  if (!spec.ok())
    return Reject(metrics_, ctx, "Allocate", Invalid(spec.status()));
  auto shared = std::make_shared<WorkloadSpec>(*std::move(spec));
  if (request->dry_run()) {
    // Off the core thread unless the spec names a resource never seen:
    // interning it is a change, so the core does it first.
    return DispatchRead(
        core_, metrics_, ctx, "Allocate", response,
        [shared, response](const Scheduler& s) {
          // A read runs once (here or on the core), after `ready`/`prepare`.
          auto answer = s.DryRun(std::move(*shared));
          if (!answer.ok()) return ToGrpc(answer.status());
          ToProto(*answer, response);
          return grpc::Status::OK;
        },
        [shared](const Scheduler& s) { return s.KnowsResources(*shared); },
        [shared](Scheduler& s) { s.InternResources(*shared); });
  }
  auto applied = std::make_shared<absl::Status>();
  return Dispatch(
      core_, metrics_, ctx, "Allocate", request->request_id(), response,
      [shared, applied](Ctx& c) {
        *applied = c.scheduler.Submit(*shared, c.now);
      },
      [shared, applied, response](Ctx& c) {
        if (!applied->ok()) return ToGrpc(*applied);
        auto answer = c.scheduler.Answer(shared->id);
        if (!answer.ok()) return ToGrpc(answer.status());
        ToProto(*answer, response);
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::Release(
    grpc::CallbackServerContext* ctx, const v1::ReleaseRequest* request,
    v1::ReleaseResponse* response) {
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
  return Dispatch(
      core_, metrics_, ctx, "Release", request->request_id(), response,
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

grpc::ServerUnaryReactor* SchedulerService::Preempt(
    grpc::CallbackServerContext* ctx, const v1::PreemptRequest* request,
    v1::PreemptResponse* response) {
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
  return Dispatch(core_, metrics_, ctx, "Preempt", request->request_id(),
                  response, run, reply);
}

grpc::ServerWriteReactor<v1::Event>* SchedulerService::WatchEvents(
    grpc::CallbackServerContext*, const v1::WatchRequest* request) {
  return new WatchReactor(events_, metrics_, *request);
}

grpc::ServerUnaryReactor* SchedulerService::UpsertNodes(
    grpc::CallbackServerContext* ctx, const v1::UpsertNodesRequest* request,
    v1::UpsertNodesResponse* response) {
  auto parsed =
      std::make_shared<ParsedNodes>(*ParseNodes(request->nodes(), false));
  auto answer = std::make_shared<NodeChangeAnswer>();
  return Dispatch(
      core_, metrics_, ctx, "UpsertNodes", request->request_id(), response,
      [parsed, answer](Ctx& c) {
        *answer = c.scheduler.UpsertNodes(parsed->valid, c.now);
      },
      [parsed, answer, response](Ctx& c) {
        FillNodeAnswer(*answer, parsed->rejected, response);
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::RemoveNodes(
    grpc::CallbackServerContext* ctx, const v1::RemoveNodesRequest* request,
    v1::RemoveNodesResponse* response) {
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "RemoveNodes", Invalid(s));
  }
  auto names = std::make_shared<std::vector<std::string>>(
      request->names().begin(), request->names().end());
  auto answer = std::make_shared<NodeChangeAnswer>();
  return Dispatch(
      core_, metrics_, ctx, "RemoveNodes", request->request_id(), response,
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
  auto parsed = ParseNodes(request->nodes(), true);
  if (!parsed.ok())
    return Reject(metrics_, ctx, "SyncNodes", Invalid(parsed.status()));
  auto nodes = std::make_shared<ParsedNodes>(*std::move(parsed));
  auto answer = std::make_shared<NodeChangeAnswer>();
  return Dispatch(
      core_, metrics_, ctx, "SyncNodes", request->request_id(), response,
      [nodes, answer](Ctx& c) {
        *answer = c.scheduler.SyncNodes(nodes->valid, c.now);
      },
      [nodes, answer, response](Ctx& c) {
        FillNodeAnswer(*answer, {}, response);
        for (const auto& n : answer->removed) response->add_removed(n);
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::GetWorkload(
    grpc::CallbackServerContext* ctx, const v1::GetWorkloadRequest* request,
    v1::WorkloadStatus* response) {
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "GetWorkload", Invalid(s));
  }
  std::string id = request->workload_id();
  return DispatchRead(
      core_, metrics_, ctx, "GetWorkload", response,
      [id, response, specs = specs_](const Scheduler& s) {
        const Workload* w = s.FindWorkload(id);
        if (w == nullptr) {
          return grpc::Status(
              grpc::StatusCode::NOT_FOUND,
              absl::StrCat("workload_id: workload \"", id, "\" not found"));
        }
        WorkloadToProto(s, *w, *specs, response);
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::ListWorkloads(
    grpc::CallbackServerContext* ctx, const v1::ListWorkloadsRequest* request,
    v1::ListWorkloadsResponse* response) {
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "ListWorkloads", Invalid(s));
  }
  std::optional<WorkloadState> state = FromProto(request->state());
  size_t page_size =
      request->page_size() == 0 ? 100 : std::min(request->page_size(), 1000);
  std::string queue = request->queue();
  std::string after = request->page_token();
  return DispatchRead(
      core_, metrics_, ctx, "ListWorkloads", response,
      [=, specs = specs_](const Scheduler& s) {
        std::vector<const Workload*> matching;
        for (const auto& w : s.workloads()) {
          if (!w) continue;
          if (!queue.empty() && w->spec.queue != queue) continue;
          if (state && w->state != *state) continue;
          if (!after.empty() && w->spec.id <= after) continue;
          matching.push_back(w.get());
        }
        std::sort(matching.begin(), matching.end(),
                  [](const Workload* a, const Workload* b) {
                    return a->spec.id < b->spec.id;
                  });
        for (size_t i = 0; i < matching.size() && i < page_size; ++i) {
          WorkloadToProto(s, *matching[i], *specs, response->add_workloads());
        }
        if (matching.size() > page_size) {
          response->set_next_page_token(matching[page_size - 1]->spec.id);
        }
        response->set_revision(s.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* SchedulerService::Explain(
    grpc::CallbackServerContext* ctx, const v1::ExplainRequest* request,
    v1::ExplainResponse* response) {
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "Explain", Invalid(s));
  }
  std::string id = request->workload_id();
  return Dispatch(
      core_, metrics_, ctx, "Explain", "", response, nullptr,
      [id, response](Ctx& c) {
        auto answer = c.scheduler.Explain(id, c.now);
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
            return v == kUnlimited ? std::string("-1")
                                   : FormatQuantity(v, scale);
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
        ToProto(c.now, response->mutable_time());
        return grpc::Status::OK;
      });
}

// ---------------------------------------------------------------------------
// Admin service

AdminService::AdminService(CoreLoop* core, Metrics* metrics, SpecCache* specs)
    : core_(core), metrics_(metrics), specs_(specs) {
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
  auto spec = ParseQueue(request->queue());
  if (!spec.ok())
    return Reject(metrics_, ctx, "UpsertQueue", Invalid(spec.status()));
  auto shared = std::make_shared<QueueSpec>(*std::move(spec));
  auto applied = std::make_shared<absl::Status>();
  return Dispatch(
      core_, metrics_, ctx, "UpsertQueue", request->request_id(), response,
      [shared, applied](Ctx& c) {
        *applied = c.scheduler.UpsertQueue(*shared).status();
      },
      [shared, applied, response](Ctx& c) {
        if (!applied->ok()) return ToGrpc(*applied);
        QueueToProto(c.scheduler, *c.scheduler.FindQueue(shared->name),
                     response->mutable_queue());
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* AdminService::DeleteQueue(
    grpc::CallbackServerContext* ctx, const v1::DeleteQueueRequest* request,
    v1::DeleteQueueResponse* response) {
  if (auto s = ValidateRequest(*request); !s.ok()) {
    return Reject(metrics_, ctx, "DeleteQueue", Invalid(s));
  }
  std::string name = request->name();
  auto applied = std::make_shared<absl::Status>();
  return Dispatch(
      core_, metrics_, ctx, "DeleteQueue", request->request_id(), response,
      [name, applied](Ctx& c) { *applied = c.scheduler.DeleteQueue(name); },
      [applied, response](Ctx& c) {
        if (!applied->ok()) return ToGrpc(*applied);
        response->set_revision(c.scheduler.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* AdminService::ListQueues(
    grpc::CallbackServerContext* ctx, const v1::ListQueuesRequest*,
    v1::ListQueuesResponse* response) {
  return DispatchRead(
      core_, metrics_, ctx, "ListQueues", response,
      [response](const Scheduler& s) {
        for (const Queue* q :
             LiveByName(s.queues(), [](const Queue& q) -> const std::string& {
               return q.spec.name;
             })) {
          QueueToProto(s, *q, response->add_queues());
        }
        response->set_revision(s.revision());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* AdminService::GetPriorityClasses(
    grpc::CallbackServerContext* ctx, const v1::GetPriorityClassesRequest*,
    v1::GetPriorityClassesResponse* response) {
  return DispatchRead(core_, metrics_, ctx, "GetPriorityClasses", response,
                      [response](const Scheduler& s) {
                        for (const auto& pc : s.priority_classes()) {
                          auto* out = response->add_classes();
                          out->set_name(pc.name);
                          out->set_value(pc.value);
                          out->set_preemptible(pc.preemptible);
                        }
                        response->set_default_class(s.default_priority_class());
                        return grpc::Status::OK;
                      });
}

grpc::ServerUnaryReactor* AdminService::GetClusterSnapshot(
    grpc::CallbackServerContext* ctx, const v1::GetClusterSnapshotRequest*,
    v1::ClusterSnapshot* response) {
  return DispatchRead(
      core_, metrics_, ctx, "GetClusterSnapshot", response,
      [response, specs = specs_](const Scheduler& s) {
        for (const Node* n : LiveByName(
                 s.nodes(),
                 [](const Node& n) -> const std::string& { return n.name; })) {
          NodeToProto(s, *n, response->add_nodes());
        }
        for (const Queue& q : s.queues()) {
          if (q.live) QueueToProto(s, q, response->add_queues());
        }
        for (const auto& w : s.workloads()) {
          if (w) {
            WorkloadToProto(s, *w, *specs, response->add_workloads(),
                            SpecCache::Keep::kIfRoom);
          }
        }
        response->set_revision(s.revision());
        return grpc::Status::OK;
      });
}

}  // namespace gangsched::server
