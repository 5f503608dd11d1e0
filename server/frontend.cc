#include "server/frontend.h"

#include <functional>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "server/convert.h"
#include "server/grpc_status.h"
#include "server/reads.h"
#include "server/services.h"

namespace gangsched::server {

CoreClient::CoreClient(const std::vector<std::string>& addresses,
                       std::shared_ptr<grpc::ChannelCredentials> credentials) {
  for (const std::string& address : addresses) {
    // Reconnect quickly: a standby core starts listening the moment it is
    // elected, and the frontend should notice within a second.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Whatever its own core sends: answers about a 100,000-pod workload,
    // and the read cache's snapshot of a 65,000-node cluster (hundreds of
    // MiB in one message).
    args.SetMaxReceiveMessageSize(-1);
    auto channel = grpc::CreateCustomChannel(address, credentials, args);
    schedulers_.push_back(v1::Scheduler::NewStub(channel));
    admins_.push_back(v1::Admin::NewStub(channel));
    replications_.push_back(internal::Replication::NewStub(channel));
    health_.push_back(grpc::health::v1::Health::NewStub(channel));
  }
}

bool CoreClient::AnyCoreServing(absl::Duration timeout) {
  for (auto& stub : health_) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = stub->Check(&context, request, &response);
    if (status.ok() &&
        response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return true;
    }
  }
  return false;
}

CoreClient::Target CoreClient::Current() const {
  size_t i = current_.load() % schedulers_.size();
  return {schedulers_[i].get(), admins_[i].get(), replications_[i].get(), i};
}

void CoreClient::Failed(size_t index) {
  size_t expected = index;
  current_.compare_exchange_strong(expected, (index + 1) % schedulers_.size());
}

namespace {

// Copies what the core needs from the caller's context: the deadline and
// the credentials (for when the core checks them).
void Propagate(const grpc::CallbackServerContext& from,
               grpc::ClientContext* to) {
  if (from.deadline() != std::chrono::system_clock::time_point::max()) {
    to->set_deadline(from.deadline());
  }
  auto auth = from.client_metadata().find("authorization");
  if (auth != from.client_metadata().end()) {
    to->AddMetadata("authorization",
                    std::string(auth->second.data(), auth->second.size()));
  }
}

// One forwarded unary call, retried on the next core when that is safe.
template <typename Request, typename Response>
class Forwarded {
 public:
  using Call = std::function<void(CoreClient::Target, grpc::ClientContext*,
                                  const Request*, Response*,
                                  std::function<void(grpc::Status)>)>;

  static grpc::ServerUnaryReactor* Start(
      CoreClient* core, Metrics* metrics, grpc::CallbackServerContext* ctx,
      absl::string_view method, const Request* request, Response* response,
      absl::Status validation, bool retry_safe, Call call) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if constexpr (requires { request->request_id(); }) {
      if (validation.ok()) validation = CheckRequestId(request->request_id());
    }
    if (!validation.ok()) {
      metrics->RecordRequest(method,
                             static_cast<grpc::StatusCode>(validation.code()),
                             absl::ZeroDuration());
      reactor->Finish(ToGrpc(validation));
      return reactor;
    }
    auto* self = new Forwarded(core, metrics, ctx, reactor, method, request,
                               response, retry_safe, std::move(call));
    self->Attempt();
    return reactor;
  }

 private:
  Forwarded(CoreClient* core, Metrics* metrics,
            grpc::CallbackServerContext* ctx, grpc::ServerUnaryReactor* reactor,
            absl::string_view method, const Request* request,
            Response* response, bool retry_safe, Call call)
      : core_(core),
        metrics_(metrics),
        ctx_(ctx),
        reactor_(reactor),
        method_(method),
        request_(request),
        response_(response),
        retry_safe_(retry_safe),
        call_(std::move(call)),
        start_(absl::Now()) {}

  void Attempt() {
    client_ = std::make_unique<grpc::ClientContext>();
    Propagate(*ctx_, client_.get());
    CoreClient::Target target = core_->Current();
    ++attempts_;
    call_(target, client_.get(), request_, response_,
          [this, target](grpc::Status status) {
            if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
              core_->Failed(target.index);
              if (retry_safe_ && attempts_ < 2 * core_->size()) {
                response_->Clear();
                Attempt();
                return;
              }
            }
            metrics_->RecordRequest(method_, status.error_code(),
                                    absl::Now() - start_);
            reactor_->Finish(status);
            delete this;
          });
  }

  CoreClient* core_;
  Metrics* metrics_;
  grpc::CallbackServerContext* ctx_;
  grpc::ServerUnaryReactor* reactor_;
  absl::string_view method_;
  const Request* request_;
  Response* response_;
  bool retry_safe_;
  Call call_;
  absl::Time start_;
  size_t attempts_ = 0;
  std::unique_ptr<grpc::ClientContext> client_;
};

// Relays one WatchEvents stream from the core to the caller, one event in
// flight: read from the core, write to the caller, read the next.
class WatchProxy final : public grpc::ServerWriteReactor<v1::Event> {
 public:
  WatchProxy(CoreClient* core, Metrics* metrics,
             grpc::CallbackServerContext* ctx, const v1::WatchRequest& request,
             std::atomic<int64_t>* open)
      : metrics_(metrics), open_(open), upstream_(this), start_(absl::Now()) {
    open_->fetch_add(1);
    Propagate(*ctx, &client_);
    request_ = request;
    core->Current().scheduler->async()->WatchEvents(&client_, &request_,
                                                    &upstream_);
    upstream_.StartRead(&event_);
    upstream_.StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      client_.TryCancel();
      return;
    }
    upstream_.StartRead(&event_);
  }
  void OnCancel() override { client_.TryCancel(); }
  void OnDone() override {
    open_->fetch_sub(1);
    metrics_->RecordRequest("WatchEvents", final_code_, absl::Now() - start_);
    Release();
  }

 private:
  class Upstream final : public grpc::ClientReadReactor<v1::Event> {
   public:
    explicit Upstream(WatchProxy* proxy) : proxy_(proxy) {}
    void OnReadDone(bool ok) override {
      if (ok) proxy_->StartWrite(&proxy_->event_);
      // !ok: the stream ended; OnDone carries the status.
    }
    void OnDone(const grpc::Status& status) override {
      proxy_->final_code_ = status.error_code();
      proxy_->Finish(status);
      proxy_->Release();
    }

   private:
    WatchProxy* proxy_;
  };

  // Deleted once both the caller's stream and the core's stream are done.
  void Release() {
    if (--references_ == 0) delete this;
  }

  Metrics* metrics_;
  std::atomic<int64_t>* open_;
  grpc::ClientContext client_;
  v1::WatchRequest request_;
  v1::Event event_;
  Upstream upstream_;
  absl::Time start_;
  std::atomic<int> references_{2};
  grpc::StatusCode final_code_ = grpc::StatusCode::OK;
};

// The read's min_revision (0 for a request without one).
template <typename Request>
int64_t MinRevisionOf(const Request& request) {
  if constexpr (requires { request.min_revision(); }) {
    return request.min_revision();
  } else {
    return 0;
  }
}

}  // namespace

// Each method: validate, then forward. Retried only when repeating it
// cannot apply anything twice.
// Who may call is checked here, at the edge, first (docs/SECURITY.md); the
// caller's token goes on to the core, which checks it again.
// The `...` (reads only): the answer from the read cache, an expression of
// `s` (the replica), `request` and `response`, used when the cache holds
// the state the request asks for (its min_revision).
#define GANGSCHED_FORWARD(Service, Method, Stub, Request, Response,           \
                          validation, retry_safe, access, workload, queue,    \
                          ...)                                                \
  grpc::ServerUnaryReactor* Service::Method(grpc::CallbackServerContext* ctx, \
                                            const v1::Request* request,       \
                                            v1::Response* response) {         \
    if (grpc::Status denied =                                                 \
            access_->Check(*ctx, #Method, access, workload, queue);           \
        !denied.ok()) {                                                       \
      metrics_->RecordRequest(#Method, denied.error_code(),                   \
                              absl::ZeroDuration());                          \
      grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();              \
      reactor->Finish(std::move(denied));                                     \
      return reactor;                                                         \
    }                                                                         \
    __VA_OPT__(if ((validation).ok()) {                                       \
      if (cache_ != nullptr) {                                                \
        absl::Time start = absl::Now();                                       \
        grpc::Status answered;                                                \
        /* NOT_FOUND may be news the cache has not heard yet: the core */     \
        /* confirms it. */                                                    \
        if (cache_->Read(                                                     \
                MinRevisionOf(*request),                                      \
                [&](const Scheduler& s) { answered = __VA_ARGS__; }) &&       \
            answered.error_code() != grpc::StatusCode::NOT_FOUND) {           \
          metrics_->RecordReadAnswered(true);                                 \
          metrics_->RecordRequest(#Method, answered.error_code(),             \
                                  absl::Now() - start);                       \
          grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();          \
          reactor->Finish(std::move(answered));                               \
          return reactor;                                                     \
        }                                                                     \
      }                                                                       \
      metrics_->RecordReadAnswered(false);                                    \
    })                                                                        \
    return Forwarded<v1::Request, v1::Response>::Start(                       \
        core_, metrics_, ctx, #Method, request, response, validation,         \
        retry_safe,                                                           \
        [](CoreClient::Target target, grpc::ClientContext* client,            \
           const v1::Request* req, v1::Response* resp,                        \
           std::function<void(grpc::Status)> done) {                          \
          target.Stub->async()->Method(client, req, resp, std::move(done));   \
        });                                                                   \
  }

GANGSCHED_FORWARD(ForwardingScheduler, Allocate, scheduler, AllocateRequest,
                  AllocateResponse, ValidateRequest(*request),
                  request->dry_run() || !request->request_id().empty(),
                  request->dry_run() ? Access::kRead : Access::kSchedule,
                  request->workload().id(), {})
GANGSCHED_FORWARD(ForwardingScheduler, Release, scheduler, ReleaseRequest,
                  ReleaseResponse, ValidateRequest(*request),
                  !request->request_id().empty(), Access::kSchedule,
                  request->workload_id(), {})
GANGSCHED_FORWARD(ForwardingScheduler, Preempt, scheduler, PreemptRequest,
                  PreemptResponse, ValidateRequest(*request),
                  request->dry_run() || !request->request_id().empty(),
                  request->dry_run() ? Access::kRead : Access::kSchedule,
                  request->workload_id(), {})
GANGSCHED_FORWARD(ForwardingScheduler, UpsertNodes, scheduler,
                  UpsertNodesRequest, UpsertNodesResponse,
                  ValidateRequest(*request), true, Access::kSchedule, {},
                  {})  // idempotent by nature
GANGSCHED_FORWARD(ForwardingScheduler, RemoveNodes, scheduler,
                  RemoveNodesRequest, RemoveNodesResponse,
                  ValidateRequest(*request), true, Access::kSchedule, {}, {})
GANGSCHED_FORWARD(ForwardingScheduler, SyncNodes, scheduler, SyncNodesRequest,
                  SyncNodesResponse, ValidateRequest(*request), true,
                  Access::kSchedule, {}, {})
GANGSCHED_FORWARD(ForwardingScheduler, GetWorkload, scheduler,
                  GetWorkloadRequest, WorkloadStatus, ValidateRequest(*request),
                  true, Access::kRead, {}, {},
                  ReadWorkload(s, cache_->specs(), request->workload_id(),
                               response))
GANGSCHED_FORWARD(ForwardingScheduler, ListWorkloads, scheduler,
                  ListWorkloadsRequest, ListWorkloadsResponse,
                  ValidateRequest(*request), true, Access::kRead, {}, {},
                  ReadWorkloads(s, cache_->specs(), *request, response))
GANGSCHED_FORWARD(ForwardingScheduler, Explain, scheduler, ExplainRequest,
                  ExplainResponse, ValidateRequest(*request), true,
                  Access::kRead, {}, {})
GANGSCHED_FORWARD(ForwardingAdmin, UpsertQueue, admin, UpsertQueueRequest,
                  UpsertQueueResponse, ValidateRequest(*request),
                  !request->request_id().empty(), Access::kAdmin, {},
                  request->queue().name())
GANGSCHED_FORWARD(ForwardingAdmin, DeleteQueue, admin, DeleteQueueRequest,
                  DeleteQueueResponse, ValidateRequest(*request),
                  !request->request_id().empty(), Access::kAdmin, {},
                  request->name())
GANGSCHED_FORWARD(ForwardingAdmin, ListQueues, admin, ListQueuesRequest,
                  ListQueuesResponse, ValidateRequest(*request), true,
                  Access::kRead, {}, {}, ReadQueues(s, response))
GANGSCHED_FORWARD(ForwardingAdmin, GetPriorityClasses, admin,
                  GetPriorityClassesRequest, GetPriorityClassesResponse,
                  absl::OkStatus(), true, Access::kRead, {}, {},
                  ReadPriorityClasses(s, response))
GANGSCHED_FORWARD(ForwardingAdmin, GetClusterSnapshot, admin,
                  GetClusterSnapshotRequest, ClusterSnapshot,
                  ValidateRequest(*request), true, Access::kRead, {}, {},
                  ReadClusterSnapshot(s, cache_->specs(), response))

#undef GANGSCHED_FORWARD

grpc::ServerWriteReactor<v1::Event>* ForwardingScheduler::WatchEvents(
    grpc::CallbackServerContext* ctx, const v1::WatchRequest* request) {
  if (grpc::Status denied = access_->Check(*ctx, "WatchEvents", Access::kRead);
      !denied.ok()) {
    return RefuseWatch(metrics_, std::move(denied));
  }
  if (absl::Status s = ValidateRequest(*request); !s.ok()) {
    return RefuseWatch(metrics_, ToGrpc(s));
  }
  if (open_watches_.load() >= max_watch_streams_) {
    metrics_->RecordWatchDropped("too_many");
    return RefuseWatch(
        metrics_, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               absl::StrCat("too many WatchEvents streams (",
                                            max_watch_streams_,
                                            " open); close some, or raise "
                                            "--max-watch-streams")));
  }
  return new WatchProxy(core_, metrics_, ctx, *request, &open_watches_);
}

}  // namespace gangsched::server
