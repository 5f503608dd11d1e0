#include "server/etcd_store.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "server/log.h"
#include "server/store_codec.h"

namespace gangsched::server {
namespace {

namespace pb = etcdserverpb;

// The smallest key greater than every key starting with `prefix`.
std::string PrefixEnd(std::string prefix) {
  for (int i = static_cast<int>(prefix.size()) - 1; i >= 0; --i) {
    if (static_cast<unsigned char>(prefix[i]) < 0xff) {
      prefix[i] = static_cast<char>(prefix[i] + 1);
      prefix.resize(i + 1);
      return prefix;
    }
  }
  return std::string(1, '\0');
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  return absl::UnavailableError(
      absl::StrCat("etcd ", what, ": ", s.error_message()));
}

std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(timeout));
  return ctx;
}

// Request answers are keyed by sequence so old ones can be range-deleted.
std::string SeqKey(uint64_t seq) { return absl::StrFormat("%020d", seq); }

}  // namespace

EtcdStore::EtcdStore(const Options& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Connect(
    const Options& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError(
        "--etcd-endpoints: at least one host:port");
  }
  std::unique_ptr<EtcdStore> store(new EtcdStore(options));
  // Several endpoints: gRPC's ipv4 resolver with pick_first tries them in
  // turn; one endpoint (possibly a name) is used as given.
  std::string target =
      options.endpoints.size() == 1
          ? options.endpoints[0]
          : absl::StrCat("ipv4:", absl::StrJoin(options.endpoints, ","));
  auto channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  store->kv_ = pb::KV::NewStub(channel);
  store->lease_ = pb::Lease::NewStub(channel);
  // Wait for etcd to answer at all before campaigning.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (;;) {
    pb::RangeRequest request;
    request.set_key(store->Key("meta", "revision"));
    pb::RangeResponse response;
    grpc::Status s =
        store->kv_->Range(Context(absl::Seconds(2)).get(), request, &response);
    if (s.ok()) break;
    if (absl::Now() > deadline) return FromGrpc(s, absl::StrCat("at ", target));
    absl::SleepFor(absl::Milliseconds(200));
  }
  return store;
}

EtcdStore::~EtcdStore() {
  stopping_ = true;
  if (keepalive_.joinable()) keepalive_.join();
}

std::string EtcdStore::Key(absl::string_view kind,
                           absl::string_view name) const {
  return absl::StrCat(options_.prefix, "/", kind, "/", name);
}

std::string EtcdStore::Leader() {
  pb::RangeRequest request;
  request.set_key(Key("leader", "core"));
  pb::RangeResponse response;
  if (!kv_->Range(Context(absl::Seconds(2)).get(), request, &response).ok() ||
      response.kvs().empty()) {
    return "";
  }
  return response.kvs(0).value();
}

absl::Status EtcdStore::Campaign(std::function<void()> on_lost) {
  on_lost_ = std::move(on_lost);
  pb::LeaseGrantRequest grant;
  grant.set_ttl(absl::ToInt64Seconds(options_.lease_ttl));
  pb::LeaseGrantResponse granted;
  if (grpc::Status s =
          lease_->LeaseGrant(Context(absl::Seconds(5)).get(), grant, &granted);
      !s.ok()) {
    return FromGrpc(s, "lease grant");
  }
  lease_id_ = granted.id();
  last_renewed_us_ = absl::ToUnixMicros(absl::Now());
  keepalive_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "gs-etcd-lease");
    KeepAlive();
  });
  std::string said_standby;
  for (;;) {
    pb::TxnRequest txn;
    auto* cmp = txn.add_compare();
    cmp->set_key(Key("leader", "core"));
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(0);
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(Key("leader", "core"));
    put->set_value(options_.id);
    put->set_lease(lease_id_);
    pb::TxnResponse response;
    grpc::Status s = kv_->Txn(Context(absl::Seconds(5)).get(), txn, &response);
    if (s.ok() && response.succeeded()) {
      LogLine(spdlog::level::info, "elected leader")
          .Add("id", options_.id)
          .Add("lease", lease_id_);
      return absl::OkStatus();
    }
    std::string leader = Leader();
    if (leader != said_standby) {
      LogLine(spdlog::level::info, "standby")
          .Add("leader", leader)
          .Add("id", options_.id);
      said_standby = leader;
    }
    absl::SleepFor(absl::Seconds(1));
  }
}

void EtcdStore::KeepAlive() {
  const absl::Duration every = options_.lease_ttl / 3;
  const absl::Duration give_up = options_.lease_ttl / 2;
  while (!stopping_) {
    grpc::ClientContext ctx;
    auto stream = lease_->LeaseKeepAlive(&ctx);
    while (!stopping_) {
      pb::LeaseKeepAliveRequest request;
      request.set_id(lease_id_);
      pb::LeaseKeepAliveResponse response;
      if (!stream->Write(request) || !stream->Read(&response)) break;
      if (response.ttl() <= 0) {
        LogLine(spdlog::level::critical, "etcd lease expired; stopping")
            .Add("lease", lease_id_);
        if (on_lost_) on_lost_();
        return;
      }
      last_renewed_us_ = absl::ToUnixMicros(absl::Now());
      absl::SleepFor(every);
    }
    ctx.TryCancel();
    // Could not renew: give up before the lease can expire under us.
    if (absl::Now() - absl::FromUnixMicros(last_renewed_us_) > give_up) {
      LogLine(spdlog::level::critical, "cannot renew the etcd lease; stopping")
          .Add("lease", lease_id_);
      if (on_lost_) on_lost_();
      return;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::StatusOr<pb::RangeResponse> EtcdStore::RangePrefix(
    const std::string& prefix) {
  pb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  pb::RangeResponse response;
  grpc::Status s =
      kv_->Range(Context(absl::Seconds(30)).get(), request, &response);
  if (!s.ok()) return FromGrpc(s, "range");
  return response;
}

absl::StatusOr<Store::Loaded> EtcdStore::Load(Scheduler& scheduler,
                                              IdempotencyCache& requests) {
  StoredState state;
  for (auto [kind, out] : {std::pair<const char*, std::vector<std::string>*>{
                               "queues", &state.queues},
                           {"nodes", &state.nodes},
                           {"workloads", &state.workloads}}) {
    auto ranges = RangePrefix(Key(kind, ""));
    if (!ranges.ok()) return ranges.status();
    for (const auto& kv : ranges->kvs()) out->push_back(kv.value());
  }
  auto meta = RangePrefix(Key("meta", ""));
  if (!meta.ok()) return meta.status();
  for (const auto& kv : meta->kvs()) {
    int64_t value = std::strtoll(kv.value().c_str(), nullptr, 10);
    if (kv.key() == Key("meta", "revision")) state.revision = value;
    if (kv.key() == Key("meta", "submit_seq"))
      state.submit_seq = static_cast<uint64_t>(value);
  }
  auto answers = RangePrefix(Key("requests", ""));
  if (!answers.ok()) return answers.status();
  for (const auto& kv : answers->kvs()) {
    internal::StoredAnswer a;
    if (!a.ParseFromString(kv.value()))
      return absl::DataLossError("stored answer does not parse");
    state.answers.push_back(FromStored(a));
  }
  return RestoreState(state, scheduler, requests);
}

absl::Status EtcdStore::Write(const std::vector<const StoreRows*>& batches) {
  // One transaction, valid only while this core holds the leader key.
  pb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key(Key("leader", "core"));
  cmp->set_target(pb::Compare::VALUE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_value(options_.id);
  bool any_answer = false;
  for (const StoreRows* batch : batches) {
    for (const StoreRows::Row& row : batch->rows) {
      const char* kind = row.table == StoreRows::Table::kWorkload ? "workloads"
                         : row.table == StoreRows::Table::kNode   ? "nodes"
                                                                  : "queues";
      if (row.value) {
        auto* put = txn.add_success()->mutable_request_put();
        put->set_key(Key(kind, row.key));
        put->set_value(*row.value);
      } else {
        txn.add_success()->mutable_request_delete_range()->set_key(
            Key(kind, row.key));
      }
    }
    for (const StoreRows::Answer& a : batch->answers) {
      internal::StoredAnswer stored;
      ToStored(a, &stored);
      auto* put = txn.add_success()->mutable_request_put();
      put->set_key(Key("requests", SeqKey(a.seq)));
      put->set_value(stored.SerializeAsString());
      any_answer = true;
    }
  }
  const StoreRows& last = *batches.back();
  for (auto [key, value] :
       {std::pair<const char*, int64_t>{"revision", last.revision},
        {"submit_seq", static_cast<int64_t>(last.submit_seq)}}) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(Key("meta", key));
    put->set_value(absl::StrCat(value));
  }
  // The table keeps what the in-memory table keeps.
  if (any_answer && last.answers_kept_from > 0) {
    auto* trim = txn.add_success()->mutable_request_delete_range();
    trim->set_key(Key("requests", ""));
    trim->set_range_end(Key("requests", SeqKey(last.answers_kept_from)));
  }
  pb::TxnResponse response;
  grpc::Status s = kv_->Txn(Context(absl::Seconds(10)).get(), txn, &response);
  if (!s.ok()) return FromGrpc(s, "txn");
  if (!response.succeeded()) {
    return absl::FailedPreconditionError(
        "this core is no longer the etcd leader");
  }
  return absl::OkStatus();
}

}  // namespace gangsched::server
