#include "server/store_codec.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "server/arena_allocator.h"
#include "server/convert.h"

namespace gangsched::server {
namespace {

int64_t EncodeTime(absl::Time t) {
  if (t == absl::InfinitePast()) return std::numeric_limits<int64_t>::min();
  if (t == absl::InfiniteFuture()) return std::numeric_limits<int64_t>::max();
  return absl::ToUnixMicros(t);
}

// A record is built as a protobuf only to be serialized. On an arena whose
// first block is on the stack its strings, maps and sub-messages cost no
// malloc and free each, and no destructor walk: the core thread encodes
// every workload a batch changed, before the batch can be committed.
template <typename Message, typename Fill>
std::string EncodeOnArena(Fill fill) {
  alignas(std::max_align_t) char block[4096];
  google::protobuf::Arena arena(FirstBlockIn(block));
  Message* out = google::protobuf::Arena::CreateMessage<Message>(&arena);
  fill(*out);
  return out->SerializeAsString();
}

absl::Time DecodeTime(int64_t us) {
  if (us == std::numeric_limits<int64_t>::min()) return absl::InfinitePast();
  if (us == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
  return absl::FromUnixMicros(us);
}

// The last second of the year 9999, as google.protobuf.Timestamp allows.
constexpr int64_t kMaxTimestampSeconds = 253402300799;

std::optional<EvictionReason> ReasonFromString(absl::string_view s) {
  for (EvictionReason r : kEvictionReasons) {
    if (ToString(r) == s) return r;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<Store::Loaded> RestoreState(const StoredState& state,
                                           Scheduler& scheduler,
                                           IdempotencyCache& requests) {
  Store::Loaded loaded;
  // Queues, parents before children, in their creation order.
  std::vector<std::pair<QueueSpec, uint64_t>> pending;
  std::vector<std::pair<std::string, NamedUsage>> usage;
  for (const std::string& bytes : state.queues) {
    auto decoded = DecodeQueue(bytes);
    if (!decoded.ok()) return decoded.status();
    // Every queue, stored usage or none: what the restore itself folded in
    // (its node changes) must not stay.
    usage.emplace_back(decoded->spec.name, std::move(decoded->usage));
    pending.emplace_back(std::move(decoded->spec), decoded->created_seq);
  }
  loaded.queues = pending.size();
  if (absl::Status s = scheduler.RestoreQueues(std::move(pending)); !s.ok())
    return s;
  std::vector<NodeSpec> nodes;
  for (const std::string& bytes : state.nodes) {
    auto node = DecodeNode(bytes);
    if (!node.ok()) return node.status();
    nodes.push_back(*std::move(node));
  }
  scheduler.UpsertNodes(nodes, absl::Now());
  loaded.nodes = nodes.size();
  std::vector<WorkloadRecord> records;
  for (const std::string& bytes : state.workloads) {
    auto record = DecodeWorkload(bytes);
    if (!record.ok()) return record.status();
    records.push_back(*std::move(record));
  }
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return a.submit_seq < b.submit_seq;
  });
  for (const auto& r : records) {
    if (absl::Status s = scheduler.RestoreWorkload(r); !s.ok()) return s;
  }
  loaded.workloads = records.size();
  // Usage last: from its stored clock on, time counts what the restored
  // workloads hold (docs/SCHEDULING.md, "Time-based fair share").
  for (const auto& [name, u] : usage) {
    if (absl::Status s = scheduler.RestoreUsage(name, u); !s.ok()) return s;
  }
  // Stored counters are at least every record's; the records are a floor
  // in case a store's counters ever fell behind (an older binary run on
  // the data dir, say): a sequence number must never be handed out twice.
  int64_t revision = state.revision;
  uint64_t submit_seq = state.submit_seq;
  for (const auto& r : records) {
    revision = std::max(revision, r.revision);
    submit_seq = std::max(submit_seq, r.submit_seq);
  }
  scheduler.RestoreCounters(revision, submit_seq, absl::Now());
  loaded.revision = revision;
  std::vector<StoreRows::Answer> answers = state.answers;
  std::sort(answers.begin(), answers.end(),
            [](const auto& a, const auto& b) { return a.seq < b.seq; });
  // A request id answered again after the table forgot its first answer
  // has two stored rows until the store trims the old one: the newest is
  // the answer.
  absl::flat_hash_map<std::string, uint64_t> newest;
  for (const auto& a : answers) newest[a.key] = a.seq;
  for (const auto& a : answers) {
    if (newest[a.key] != a.seq) continue;
    CachedReply reply;
    // A code gRPC does not know (a damaged row) is kept as UNKNOWN: a
    // value outside the enum is undefined behaviour to cast.
    const bool known = a.code >= grpc::StatusCode::OK &&
                       a.code <= grpc::StatusCode::UNAUTHENTICATED;
    reply.status = grpc::Status(known ? static_cast<grpc::StatusCode>(a.code)
                                      : grpc::StatusCode::UNKNOWN,
                                a.message);
    reply.response = a.response;
    reply.digest = a.digest;
    requests.Restore(a.key, std::move(reply), a.seq);
    ++loaded.requests;
  }
  requests.TakeNew();
  if (absl::Status s = scheduler.CheckConsistency(); !s.ok()) {
    return absl::DataLossError(
        absl::StrCat("restored state is inconsistent: ", s.message()));
  }
  return loaded;
}

StoreRows EncodeChanges(const Scheduler& scheduler, const ChangeSet& changes,
                        const std::vector<IdempotencyCache::Entry>& answers) {
  StoreRows out;
  using Table = StoreRows::Table;
  for (const std::string& id : changes.workloads) {
    const Workload* w = scheduler.FindWorkload(id);
    out.rows.push_back(
        {Table::kWorkload, id,
         w ? std::optional<std::string>(EncodeWorkload(scheduler.RecordOf(*w)))
           : std::nullopt,
         w ? w->submit_seq : 0});
  }
  for (const std::string& name : changes.nodes) {
    const Node* n = scheduler.FindNode(name);
    out.rows.push_back(
        {Table::kNode, name,
         n ? std::optional<std::string>(EncodeNode(scheduler, *n))
           : std::nullopt});
  }
  for (const std::string& name : changes.queues) {
    const Queue* q = scheduler.FindQueue(name);
    out.rows.push_back(
        {Table::kQueue, name,
         q ? std::optional<std::string>(EncodeQueue(
                 q->spec, q->created_seq,
                 scheduler.usage().Named(q->id, scheduler.resources())))
           : std::nullopt});
  }
  for (const auto& a : answers) {
    out.answers.push_back({a.key, a.seq, a.reply->status.error_code(),
                           a.reply->status.error_message(), a.reply->response,
                           a.reply->digest});
  }
  out.revision = scheduler.revision();
  out.submit_seq = scheduler.submit_seq();
  return out;
}

void ToStored(const StoreRows::Answer& answer, internal::StoredAnswer* out) {
  out->set_key(answer.key);
  out->set_seq(answer.seq);
  out->set_code(answer.code);
  out->set_message(answer.message);
  out->set_response(answer.response);
  out->set_digest(answer.digest);
}

StoreRows::Answer FromStored(const internal::StoredAnswer& stored) {
  return {stored.key(),     stored.seq(),      stored.code(),
          stored.message(), stored.response(), stored.digest()};
}

std::string EncodeWorkload(const WorkloadRecord& r) {
  return EncodeOnArena<internal::StoredWorkload>(
      [&](internal::StoredWorkload& out) {
        ToProto(r.spec, out.mutable_spec());
        out.set_state(ToProto(r.state));
        ToProto(r.pending, out.mutable_pending());
        for (const auto& live : r.replica_live) {
          out.add_replica_live(std::string(live.begin(), live.end()));
        }
        for (const auto& slot : r.slots) {
          auto* s = out.add_slots();
          s->set_group(slot.group);
          s->set_index(slot.index);
          s->set_node(slot.node);
          s->set_evicting(slot.evicting);
          s->set_nominated(slot.nominated);
          for (int32_t d : DeviceIndexes(slot.devices)) s->add_gpu_devices(d);
        }
        for (const auto& e : r.evictions) ToProto(e, out.add_evictions());
        out.set_created_us(EncodeTime(r.created));
        out.set_waiting_since_us(EncodeTime(r.waiting_since));
        out.set_running_since_us(EncodeTime(r.running_since));
        out.set_below_min_since_us(EncodeTime(r.below_min_since));
        out.set_updated_us(EncodeTime(r.updated));
        out.set_revision(r.revision);
        out.set_submit_seq(r.submit_seq);
        out.set_requeue_after_eviction(r.requeue_after_eviction);
        if (r.has_class) {
          out.set_priority(r.priority);
          out.set_preemptible(r.preemptible);
        }
        out.set_class_name(r.class_name);
      });
}

absl::StatusOr<WorkloadRecord> DecodeWorkload(const std::string& bytes) {
  internal::StoredWorkload in;
  if (!in.ParseFromString(bytes))
    return absl::DataLossError("workload record does not parse");
  absl::StatusOr<WorkloadSpec> spec =
      ParseWorkloadSpec(in.spec(), Checks::kRecord);
  if (!spec.ok()) {
    return absl::DataLossError(
        absl::StrCat("stored spec: ", spec.status().message()));
  }
  std::optional<WorkloadState> state = FromProto(in.state());
  if (!state) return absl::DataLossError("stored state is unknown");
  WorkloadRecord r;
  r.spec = *std::move(spec);
  // `pods` is a node's capacity now, not a resource a pod may ask for: a
  // record written before keeps its other resources.
  for (GroupSpec& g : r.spec.groups) {
    std::erase_if(g.resources, [](const auto& named) {
      return named.first == kPodsResource;
    });
  }
  r.state = *state;
  std::optional<PendingCode> code = FromProto(in.pending().code());
  if (!code) return absl::DataLossError("stored pending code is unknown");
  r.pending = {*code, in.pending().message()};
  for (const std::string& live : in.replica_live()) {
    r.replica_live.emplace_back(live.begin(), live.end());
  }
  for (const auto& s : in.slots()) {
    DeviceMask devices = 0;
    for (int32_t d : s.gpu_devices()) {
      if (d < 0 || d >= kMaxDevices || (devices & (DeviceMask{1} << d)))
        return absl::DataLossError(absl::StrCat(
            "stored slot ", s.group(), "/", s.index(), ": GPU device ", d,
            " is out of range or listed twice"));
      devices |= DeviceMask{1} << d;
    }
    r.slots.push_back(
        {s.group(), s.index(), s.node(), s.evicting(), s.nominated(), devices});
  }
  for (const auto& e : in.evictions()) {
    std::optional<EvictionReason> reason = ReasonFromString(e.reason());
    if (!reason)
      return absl::DataLossError("stored eviction reason is unknown");
    Eviction eviction{e.workload_id(), {}, *reason, e.preemptor_workload_id()};
    for (const auto& s : e.slots())
      eviction.slots.push_back({s.group(), s.index()});
    // docs/SCHEDULING.md, "Preemption with notice": a restart keeps the
    // deadline the victim was told.
    if (e.has_evict_at() || e.has_noticed_time()) {
      // Kept to the microsecond, as every stored time is.
      auto time = [](const google::protobuf::Timestamp& t)
          -> std::optional<absl::Time> {
        if (t.seconds() < 0 || t.seconds() > kMaxTimestampSeconds ||
            t.nanos() < 0 || t.nanos() >= 1000000000)
          return std::nullopt;
        return absl::FromUnixSeconds(t.seconds()) +
               absl::Microseconds(t.nanos() / 1000);
      };
      std::optional<absl::Time> evict_at = time(e.evict_at());
      std::optional<absl::Time> noticed = time(e.noticed_time());
      if (!e.has_evict_at() || !e.has_noticed_time() || !evict_at || !noticed ||
          *noticed > *evict_at)
        return absl::DataLossError(
            "stored eviction notice is not a notice time and a later "
            "evict_at time");
      eviction.noticed = *noticed;
      eviction.evict_at = *evict_at;
    }
    r.evictions.push_back(std::move(eviction));
  }
  r.created = DecodeTime(in.created_us());
  r.waiting_since = DecodeTime(in.waiting_since_us());
  r.running_since = DecodeTime(in.running_since_us());
  r.below_min_since = DecodeTime(in.below_min_since_us());
  r.updated = DecodeTime(in.updated_us());
  r.revision = in.revision();
  r.submit_seq = in.submit_seq();
  r.requeue_after_eviction = in.requeue_after_eviction();
  r.has_class = in.has_priority() && in.has_preemptible();
  r.priority = in.priority();
  r.preemptible = in.preemptible();
  r.class_name = in.class_name();
  return r;
}

std::string EncodeQueue(const QueueSpec& spec, uint64_t created_seq,
                        const NamedUsage& usage) {
  return EncodeOnArena<internal::StoredQueue>([&](internal::StoredQueue& out) {
    ToProto(spec, out.mutable_queue());
    out.set_created_seq(created_seq);
    if (usage.clock == absl::InfinitePast()) return;
    internal::StoredUsage& u = *out.mutable_usage();
    u.set_clock_unix_nanos(absl::ToUnixNanos(usage.clock));
    u.set_bucket_nanos(absl::ToInt64Nanoseconds(usage.bucket_width));
    for (const auto& [id, amounts] : usage.buckets) {
      internal::StoredUsage::Bucket& b = *u.add_buckets();
      b.set_id(id);
      for (const auto& [name, amount] : amounts)
        (*b.mutable_amounts())[name] = amount;
    }
    for (const auto& [name, amount] : usage.reported)
      (*u.mutable_reported())[name] = amount;
    for (const auto& [name, factor] : usage.factors)
      (*u.mutable_factors())[name] = factor;
  });
}

absl::StatusOr<StoredQueueValue> DecodeQueue(const std::string& bytes) {
  internal::StoredQueue in;
  if (!in.ParseFromString(bytes))
    return absl::DataLossError("queue record does not parse");
  absl::StatusOr<QueueSpec> spec = ParseQueue(in.queue());
  if (!spec.ok())
    return absl::DataLossError(
        absl::StrCat("stored queue: ", spec.status().message()));
  StoredQueueValue out{*std::move(spec), in.created_seq(), {}};
  if (!in.has_usage()) return out;
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("stored queue ", out.spec.name, ": usage: ", why));
  };
  const internal::StoredUsage& u = in.usage();
  out.usage.clock = absl::FromUnixNanos(u.clock_unix_nanos());
  if (u.bucket_nanos() < 0) return bad("bucket_nanos is negative");
  out.usage.bucket_width = absl::Nanoseconds(u.bucket_nanos());
  int64_t last = -1;
  auto take = [&](const google::protobuf::Map<std::string, double>& in,
                  double lowest, double highest,
                  std::vector<std::pair<std::string, double>>& kept) {
    for (const auto& [name, amount] : in) {
      if (!std::isfinite(amount) || amount < lowest || amount > highest)
        return bad(absl::StrCat(name, ": ", amount, " is out of range"));
      if (!IsResourceName(name))
        return bad(absl::StrCat("\"", name, "\" is not a resource name"));
      kept.emplace_back(name, amount);
    }
    std::sort(kept.begin(), kept.end());
    return absl::OkStatus();
  };
  constexpr double kAny = std::numeric_limits<double>::max();
  for (const internal::StoredUsage::Bucket& b : u.buckets()) {
    if (b.id() <= last) return bad("bucket numbers are not increasing");
    last = b.id();
    std::vector<std::pair<std::string, double>> amounts;
    if (absl::Status s = take(b.amounts(), 0, kAny, amounts); !s.ok()) return s;
    out.usage.buckets.emplace_back(b.id(), std::move(amounts));
  }
  if (absl::Status s = take(u.reported(), 0, kAny, out.usage.reported); !s.ok())
    return s;
  if (absl::Status s = take(u.factors(), kMinUsageFactor, kMaxUsageFactor,
                            out.usage.factors);
      !s.ok())
    return s;
  return out;
}

std::string EncodeNode(const Scheduler& scheduler, const Node& node) {
  return EncodeOnArena<v1::Node>([&](v1::Node& out) {
    out.set_name(node.name);
    ResourcesToProto(scheduler.resources(), node.allocatable,
                     out.mutable_allocatable());
    GpuMemoryToProto(node, &out);
    if (node.declares_pods) {
      (*out.mutable_allocatable())[std::string(kPodsResource)] =
          FormatQuantity(node.max_pods * 1000, QuantityScale::kMilli);
    }
    for (const auto& [k, v] : node.labels) (*out.mutable_labels())[k] = v;
    TaintsToProto(node.taints, out.mutable_taints());
    out.set_schedulable(node.schedulable);
  });
}

absl::StatusOr<NodeSpec> DecodeNode(const std::string& bytes) {
  v1::Node in;
  if (!in.ParseFromString(bytes))
    return absl::DataLossError("node record does not parse");
  absl::StatusOr<NodeSpec> spec = ParseNode(in, "node", Checks::kRecord);
  if (!spec.ok())
    return absl::DataLossError(
        absl::StrCat("stored node: ", spec.status().message()));
  return spec;
}

}  // namespace gangsched::server
