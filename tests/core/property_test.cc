// Property test (STYLE.md): thousands of random operation sequences against
// the Scheduler, checking after every cycle that no node is over its
// allocatable, no queue over a limit at any level, every gang is
// all-or-nothing (a RUNNING gang holds its minimum unless it just lost pods,
// nothing pending holds anything), every roll-up adds up, and fair shares
// never divide more than there is.
//
// It also keeps what a store would hold: after every batch the changes the
// core reported (TakeChanges) are applied to a mirror of records, and the
// mirror must equal the live state record by record. A mutation that does
// not record its change (the family of "the requeue flag was set but not
// stored") fails here at once. Every few batches the run restarts: a new
// Scheduler is restored from the mirror, must equal the old one, and goes
// on in its place.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/node_filter.h"
#include "core/scheduler.h"
#include "core/taints.h"
#include "gtest/gtest.h"
#include "tests/core/test_util.h"

namespace gangsched {
namespace {

using testing::GpuNode;
using testing::Group;
using testing::kGi;
using testing::Workload;

std::string TimeText(absl::Time t) {
  if (t == absl::InfinitePast()) return "-inf";
  if (t == absl::InfiniteFuture()) return "+inf";
  return absl::StrCat(absl::ToUnixNanos(t));
}

// Every field of a record, so two records compare as text.
std::string Describe(const WorkloadRecord& r) {
  std::string out = absl::StrCat(
      r.spec.id, " q=", r.spec.queue, " class=", r.spec.priority_class,
      " state=", ToString(r.state), " pending=", ToString(r.pending.code), ":",
      r.pending.message, " created=", TimeText(r.created),
      " waiting=", TimeText(r.waiting_since),
      " running=", TimeText(r.running_since),
      " below=", TimeText(r.below_min_since), " updated=", TimeText(r.updated),
      " rev=", r.revision, " seq=", r.submit_seq,
      " requeue=", r.requeue_after_eviction, " prio=", r.priority,
      " preemptible=", r.preemptible, " has_class=", r.has_class,
      " class_name=", r.class_name, "\n");
  for (const GroupSpec& g : r.spec.groups) {
    absl::StrAppend(&out, " group ", g.name, " ", g.min_count, "/",
                    g.desired_count, "/", g.max_count, "x", g.pods_per_replica,
                    "\n");
  }
  for (const auto& live : r.replica_live) {
    absl::StrAppend(&out, " live");
    for (uint8_t l : live) absl::StrAppend(&out, " ", l);
    absl::StrAppend(&out, "\n");
  }
  for (const auto& slot : r.slots) {
    absl::StrAppend(&out, " slot ", slot.group, "/", slot.index, " on ",
                    slot.node, " evicting=", slot.evicting,
                    " nominated=", slot.nominated, "\n");
  }
  for (const Eviction& e : r.evictions) {
    absl::StrAppend(&out, " eviction ", ToString(e.reason), " for ",
                    e.preemptor, " noticed ", absl::FormatTime(e.noticed),
                    " evict_at ", absl::FormatTime(e.evict_at), ":");
    for (const SlotRef& ref : e.slots)
      absl::StrAppend(&out, " ", ref.group, "/", ref.index);
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string Describe(const QueueSpec& q, uint64_t created_seq) {
  std::string out = absl::StrCat(
      q.name, " parent=", q.parent, " prio=", q.priority, " seq=", created_seq,
      " preempt=", absl::FormatDuration(q.preempt_min_runtime),
      " reclaim=", absl::FormatDuration(q.reclaim_min_runtime),
      " notice=", absl::FormatDuration(q.preemption_notice));
  for (const auto& [name, r] : q.resources) {
    absl::StrAppend(&out, " ", name, "=", r.quota, "/", r.limit, "/",
                    r.over_quota_weight);
  }
  return out;
}

NodeSpec SpecOf(const Scheduler& s, const Node& n) {
  NodeSpec spec;
  spec.name = n.name;
  spec.allocatable = s.resources().ToNamed(n.allocatable);
  // GPU memory is given per device, not as the total the core keeps.
  std::erase_if(spec.allocatable,
                [](const auto& r) { return r.first == kGpuMemoryName; });
  spec.gpu_memory = n.gpu_memory;
  if (n.declares_pods) {
    spec.allocatable.push_back({std::string(kPodsResource), n.max_pods * 1000});
    std::sort(spec.allocatable.begin(), spec.allocatable.end());
  }
  spec.labels = n.labels;
  spec.taints = n.taints;
  spec.schedulable = n.schedulable;
  return spec;
}

std::string Describe(const NodeSpec& n) {
  std::string out = absl::StrCat(n.name, " schedulable=", n.schedulable,
                                 " gpu_memory=", n.gpu_memory);
  for (const auto& [k, v] : n.allocatable)
    absl::StrAppend(&out, " ", k, "=", v);
  for (const auto& [k, v] : n.labels) absl::StrAppend(&out, " ", k, ":", v);
  for (const Taint& t : n.taints)
    absl::StrAppend(&out, " taint ", TaintText(t));
  return out;
}

// What a store holds: a record per name, and the counters.
struct Mirror {
  std::map<std::string, WorkloadRecord> workloads;
  std::map<std::string, std::pair<QueueSpec, uint64_t>> queues;
  std::map<std::string, NamedUsage> usage;  // stored with the queue
  std::map<std::string, NodeSpec> nodes;
  int64_t revision = 0;
  uint64_t submit_seq = 0;

  void Apply(const Scheduler& s, const ChangeSet& changes) {
    for (const std::string& id : changes.workloads) {
      const gangsched::Workload* w = s.FindWorkload(id);
      if (w == nullptr) {
        workloads.erase(id);
      } else {
        workloads[id] = s.RecordOf(*w);
      }
    }
    for (const std::string& name : changes.queues) {
      const gangsched::Queue* q = s.FindQueue(name);
      if (q == nullptr) {
        queues.erase(name);
        usage.erase(name);
      } else {
        queues[name] = {q->spec, q->created_seq};
        usage[name] = s.usage().Named(q->id, s.resources());
      }
    }
    for (const std::string& name : changes.nodes) {
      const Node* n = s.FindNode(name);
      if (n == nullptr) {
        nodes.erase(name);
      } else {
        nodes[name] = SpecOf(s, *n);
      }
    }
    revision = s.revision();
    submit_seq = s.submit_seq();
  }

  // The first difference between the mirror and the live state, or "".
  std::string Diff(const Scheduler& s) const {
    size_t live = 0;
    for (const auto& w : s.workloads()) {
      if (!w) continue;
      ++live;
      auto it = workloads.find(w->spec.id);
      if (it == workloads.end())
        return absl::StrCat("workload ", w->spec.id, " was never stored");
      std::string want = Describe(s.RecordOf(*w));
      std::string have = Describe(it->second);
      if (want != have) {
        return absl::StrCat("workload ", w->spec.id,
                            " differs from its stored record:\nlive:   ", want,
                            "stored: ", have);
      }
    }
    if (live != workloads.size()) return "a forgotten workload is still stored";
    size_t queues_live = 0;
    for (const gangsched::Queue& q : s.queues()) {
      if (!q.live) continue;
      ++queues_live;
      auto it = queues.find(q.spec.name);
      if (it == queues.end() || Describe(it->second.first, it->second.second) !=
                                    Describe(q.spec, q.created_seq)) {
        return absl::StrCat("queue ", q.spec.name, " differs from its record");
      }
      auto u = usage.find(q.spec.name);
      if (u == usage.end() ||
          !(u->second == s.usage().Named(q.id, s.resources()))) {
        return absl::StrCat("queue ", q.spec.name,
                            ": usage differs from its record");
      }
    }
    if (queues_live != queues.size()) return "a deleted queue is still stored";
    size_t nodes_live = 0;
    for (const Node& n : s.nodes()) {
      if (!n.live) continue;
      ++nodes_live;
      auto it = nodes.find(n.name);
      if (it == nodes.end() || Describe(it->second) != Describe(SpecOf(s, n))) {
        return absl::StrCat("node ", n.name, " differs from its record");
      }
    }
    if (nodes_live != nodes.size()) return "a removed node is still stored";
    if (revision != s.revision()) return "revision differs";
    return "";
  }

  // A new scheduler from the records, as a restart builds it.
  std::unique_ptr<Scheduler> Restore(const Scheduler& like,
                                     absl::Time now) const {
    auto s = std::make_unique<Scheduler>(like.options());
    // The config's topologies, as a restart reads its file first.
    EXPECT_TRUE(s->SetTopologies(like.topologies()).ok());
    EXPECT_TRUE(s->SetPriorityClasses(like.priority_classes(),
                                      like.default_priority_class(),
                                      ClassRemoval::kKeep)
                    .ok());
    std::vector<std::pair<QueueSpec, uint64_t>> qs;
    for (const auto& [name, q] : queues) qs.push_back(q);
    absl::Status restored = s->RestoreQueues(std::move(qs));
    EXPECT_TRUE(restored.ok()) << restored;
    std::vector<NodeSpec> ns;
    for (const auto& [name, n] : nodes) ns.push_back(n);
    s->UpsertNodes(ns, now);
    std::vector<const WorkloadRecord*> ws;
    for (const auto& [id, r] : workloads) ws.push_back(&r);
    std::sort(ws.begin(), ws.end(), [](const auto* a, const auto* b) {
      return a->submit_seq < b->submit_seq;
    });
    for (const WorkloadRecord* r : ws) {
      absl::Status st = s->RestoreWorkload(*r);
      EXPECT_TRUE(st.ok()) << st;
    }
    for (const auto& [name, u] : usage) {
      absl::Status st = s->RestoreUsage(name, u);
      EXPECT_TRUE(st.ok()) << st;
    }
    s->RestoreCounters(revision, submit_seq, now);
    return s;
  }
};

class RandomRun {
 public:
  explicit RandomRun(uint32_t seed, bool walk_every_active = false,
                     bool cache_domains = true, bool keep_reasons = true,
                     bool count_victim_fits = true)
      : rng_(seed),
        s_(std::make_unique<Scheduler>(SchedulerOptions{
            .stale_gang_grace = absl::Seconds(30),
            .walk_every_active = walk_every_active,
            .cache_domains = cache_domains,
            .keep_reasons = keep_reasons,
            .count_victim_fits = count_victim_fits,
            // Every other run: usage moves weights, on a scale the run's
            // minutes of virtual time cover (refreshes, decay, the window).
            .usage = {.enabled = seed % 2 == 0,
                      .half_life = absl::Minutes(3),
                      .window = absl::Minutes(8),
                      .strength = 1,
                      .refresh = absl::Seconds(30)}})) {
    // dept (limit 12 GPUs) > team-a, team-b; ops (high priority); misc.
    Add("dept", "", 100, 6000, 12000, 1);
    Add("team-a", "dept", 100, 2000, kUnlimited, 1);
    Add("team-b", "dept", 100, 2000, 6000, 3);
    Add("ops", "", 120, 4000, kUnlimited, 1);
    Add("misc", "", 90, 0, 8000, 0);
    Add("tmp", "", 100, 1000, kUnlimited, 1);
    Add("dept2", "", 100, 0, kUnlimited, 1);  // holds no work: tmp moves here
    leaves_ = {"team-a", "team-b", "ops", "misc", "tmp"};
    EXPECT_TRUE(s_->SetTopologies(kTopologies[0]).ok());
  }

  // Topologies (docs/SCHEDULING.md, "Topologies"): zone > rack, then a
  // config that drops the rack level, then none (day two: workloads that
  // name what is gone wait).
  inline static const std::vector<Topology> kTopologies[] = {
      {{"cluster", {"zone", "rack"}}}, {{"cluster", {"zone"}}}, {}};
  void MaybeRacked(NodeSpec& n) {
    if (Pick(4) == 0) return;
    n.labels.emplace_back("rack", absl::StrCat("r", Pick(2)));
    std::sort(n.labels.begin(), n.labels.end());
  }
  // A workload in one of four names the topology: a required and a
  // preferred level, and segments of its worker group.
  void MaybeTopology(WorkloadSpec& spec) {
    if (Pick(4) != 0) return;
    static const char* kLevels[] = {"", "zone", "rack"};
    spec.placement.topology = "cluster";
    spec.placement.required_level = kLevels[Pick(3)];
    spec.placement.preferred_level = kLevels[Pick(3)];
    GroupSpec& w = spec.groups.back();
    if (Pick(2) == 0) {
      w.segment_size = w.pods_per_replica * (1 + Pick(2));
      w.segment_level = Pick(2) ? "rack" : "zone";
    }
  }

  void Add(const std::string& name, const std::string& parent, int priority,
           int64_t quota, int64_t limit, double weight) {
    QueueSpec q;
    q.name = name;
    q.parent = parent;
    q.priority = priority;
    q.resources = {
        {"nvidia.com/gpu",
         {.quota = quota, .limit = limit, .over_quota_weight = weight}}};
    q.reclaim_min_runtime = absl::Seconds(Pick(3) * 20);
    EXPECT_TRUE(s_->UpsertQueue(q).ok());
  }

  // The two zoned nodes every sequence starts with, stored in the mirror.
  void AddFirstNodes() {
    NodeSpec n0 = GpuNode("n0", 8, {{"zone", "a"}});
    NodeSpec n1 = GpuNode("n1", 8, {{"zone", "b"}});
    n0.gpu_memory = 80 * kGi;
    n1.gpu_memory = 40 * kGi;
    s_->UpsertNodes({n0, n1}, now_);
    Commit(*s_);
  }

  int Pick(int n) {
    return static_cast<int>(rng_() % static_cast<uint32_t>(n));
  }
  static std::string DevicesDump(const Scheduler& s) {
    std::string out;
    for (const Node& n : s.nodes()) {
      if (!n.live) continue;
      absl::StrAppend(&out, n.name, "[", absl::StrJoin(n.devices.held, ","),
                      " r", n.devices.reserved_whole, "/",
                      n.devices.reserved_fractions, "] ");
    }
    return out;
  }

  // One group in four asks for a fraction of a GPU (a quarter, a half or
  // three quarters) instead of whole ones: devices are shared, and every
  // invariant (CheckConsistency checks each device) must still hold.
  // Of the rest, one in four asks GPU memory (10, 20 or 40 GiB) instead:
  // its share of a device depends on the node's device memory.
  void MaybeFractional(GroupSpec& g) {
    if (Pick(4) != 0) {
      if (Pick(4) != 0) return;
      const int64_t memory = (int64_t{10} << Pick(3)) * kGi;
      for (auto& r : g.resources) {
        if (r.first == "nvidia.com/gpu")
          r = {std::string(kGpuMemoryName), memory};
      }
      std::sort(g.resources.begin(), g.resources.end());
      return;
    }
    const int64_t milli = 250 * (1 + Pick(3));
    for (auto& [name, amount] : g.resources) {
      if (name == "nvidia.com/gpu") amount = milli;
    }
    g.gpu_fraction = static_cast<double>(milli) / 1000;
  }

  // Taints and tolerations (docs/SCHEDULING.md, "Taints and
  // tolerations"): a node in three carries a team taint of a random effect,
  // a worker group in three tolerates one team, or every effect of it.
  TaintEffect AnyEffect() {
    static constexpr TaintEffect kEffects[] = {TaintEffect::kNoSchedule,
                                               TaintEffect::kPreferNoSchedule,
                                               TaintEffect::kNoExecute};
    return kEffects[Pick(3)];
  }
  void MaybeTainted(NodeSpec& n) {
    if (Pick(3) == 0)
      n.taints.push_back({"team", Pick(2) ? "a" : "b", AnyEffect()});
  }
  void MaybeTolerant(GroupSpec& g) {
    if (Pick(3) != 0) return;
    Toleration t;
    t.key = "team";
    if (Pick(2) == 0) {
      t.op = TolerationOperator::kExists;
    } else {
      t.value = Pick(2) ? "a" : "b";
    }
    t.effect = Pick(2) ? TaintEffect::kAny : AnyEffect();
    g.tolerations.push_back(std::move(t));
  }

  // Node affinity (docs/SCHEDULING.md, "Node affinity"): nodes carry a
  // generation label 1 to 3 (or none); a worker group in four requires a
  // zone, a generation above one, or not a node by name, and may prefer a
  // zone.
  void MaybeGenerational(NodeSpec& n) {
    if (Pick(4) == 0) return;
    n.labels.emplace_back("gen", absl::StrCat(1 + Pick(3)));
    std::sort(n.labels.begin(), n.labels.end());
  }
  void MaybeAffine(GroupSpec& g) {
    if (Pick(4) != 0) return;
    AffinityExpression e;
    switch (Pick(4)) {
      case 0:
        e.key = "zone";
        e.op = Pick(2) ? AffinityOperator::kIn : AffinityOperator::kNotIn;
        e.values = {Pick(2) ? "a" : "b"};
        break;
      case 1:
        e.key = "gen";
        e.op = Pick(2) ? AffinityOperator::kGt : AffinityOperator::kLt;
        e.number = 1 + Pick(2);
        e.values = {absl::StrCat(e.number)};
        break;
      case 2:
        e.key = "gen";
        e.op = Pick(2) ? AffinityOperator::kExists
                       : AffinityOperator::kDoesNotExist;
        break;
      default:
        e.on_name = true;
        e.op = AffinityOperator::kNotIn;
        e.values = {absl::StrCat("n", Pick(6))};
        break;
    }
    g.node_affinity.required.push_back({{std::move(e)}});
    if (Pick(2) == 0) {
      AffinityExpression zone{"zone", AffinityOperator::kIn, {"b"}};
      g.node_affinity.preferred.push_back({1 + Pick(100), {{zone}}});
    }
  }

  // Whether `node` may take a pod of `g`, written out here apart from the
  // core's rules (core/node_filter.*) so that a break there shows: its
  // NoSchedule / NoExecute taints tolerated, its labels and name matching
  // the selector and one required affinity term.
  static bool MayTake(const Node& node, const GroupSpec& g) {
    if (!node.schedulable) return false;
    for (const Taint& taint : node.taints) {
      if (taint.effect == TaintEffect::kPreferNoSchedule) continue;
      bool tolerated = false;
      for (const Toleration& t : g.tolerations) {
        tolerated |=
            (t.effect == TaintEffect::kAny || t.effect == taint.effect) &&
            (t.op == TolerationOperator::kExists
                 ? t.key.empty() || t.key == taint.key
                 : t.key == taint.key && t.value == taint.value);
      }
      if (!tolerated) return false;
    }
    auto label = [&](const std::string& key) -> std::optional<std::string> {
      for (const auto& [k, v] : node.labels) {
        if (k == key) return v;
      }
      return std::nullopt;
    };
    for (const auto& [k, v] : g.node_selector) {
      if (label(k) != v) return false;
    }
    if (g.node_affinity.required.empty()) return true;
    for (const AffinityTerm& term : g.node_affinity.required) {
      bool all = true;
      for (const AffinityExpression& e : term.expressions) {
        std::optional<std::string> v =
            e.on_name ? std::optional<std::string>(node.name) : label(e.key);
        const bool listed = v && std::find(e.values.begin(), e.values.end(),
                                           *v) != e.values.end();
        int64_t n = 0;
        const bool number = v && absl::SimpleAtoi(*v, &n);
        switch (e.op) {
          case AffinityOperator::kIn:
            all &= listed;
            break;
          case AffinityOperator::kNotIn:
            all &= !listed;
            break;
          case AffinityOperator::kExists:
            all &= v.has_value();
            break;
          case AffinityOperator::kDoesNotExist:
            all &= !v.has_value();
            break;
          case AffinityOperator::kGt:
            all &= number && n > e.number;
            break;
          case AffinityOperator::kLt:
            all &= number && n < e.number;
            break;
        }
      }
      if (all) return true;
    }
    return false;
  }

  // Every pod bound in a cycle went to a node that may take it then:
  // schedulable, its taints tolerated, its selector and affinity matched.
  std::string CheckBindings(const std::vector<Event>& events) const {
    for (const Event& e : events) {
      if (e.type != EventType::kBound) continue;
      const gangsched::Workload* w = s_->FindWorkload(e.workload);
      if (w == nullptr) continue;
      for (const Binding& b : e.bindings) {
        const Node* node = s_->FindNode(b.node);
        if (node == nullptr) return absl::StrCat("bound to unknown ", b.node);
        for (const GroupSpec& g : w->spec.groups) {
          if (g.name == b.group && !MayTake(*node, g)) {
            std::string why = absl::StrCat(
                e.workload, " ", b.group, "/", b.index, " bound to ", b.node,
                node->schedulable ? "" : " (cordoned)",
                ", which may not take "
                "it: node",
                ::gangsched::Describe(SpecOf(*s_, *node)), "; affinity ",
                AffinityText(g.node_affinity.required), "; tolerations");
            for (const Toleration& t : g.tolerations)
              absl::StrAppend(&why, " ", t.key, "=", t.value, "/",
                              static_cast<int>(t.op), "/",
                              static_cast<int>(t.effect));
            return why;
          }
        }
      }
    }
    return "";
  }

  void Step(int step) {
    now_ += absl::Seconds(Pick(4) == 0 ? Pick(40) : 1);
    int ops = 1 + Pick(3);  // a batch of operations, then one cycle
    std::vector<Event> events;
    // Bindings are checked against the nodes as they were when made: an
    // operation may bind (a confirmation completes a PIPELINED gang), and
    // the next may taint the node.
    auto take_events = [&] {
      std::vector<Event> now = s_->TakeEvents();
      const std::string misplaced = CheckBindings(now);
      EXPECT_EQ(misplaced, "");
      events.insert(events.end(), now.begin(), now.end());
    };
    for (int i = 0; i < ops; ++i) {
      Operate(step);
      take_events();
      if (getenv("PROP_TRACE"))
        fprintf(stderr, "  after op: %s\n", Check().c_str());
    }
    s_->RunCycle(now_);
    take_events();
    for (const Event& e : events) {
      for (const Eviction& ev : e.evictions)
        moved_ += ev.reason == EvictionReason::kConsolidate;
    }
    Commit(*s_);
  }
  // Consolidations announced so far (docs/SCHEDULING.md, "Consolidation"),
  // so the test can tell that its sequences reach them at all.
  int moved() const { return moved_; }

  // What a batch changed, as a leader streams it to its read replicas.
  ReplicaBatch BatchOf(const Scheduler& s, const ChangeSet& changes) {
    ReplicaBatch batch;
    for (const std::string& id : changes.workloads) {
      if (const gangsched::Workload* w = s.FindWorkload(id)) {
        batch.workloads.push_back(s.RecordOf(*w));
      } else {
        batch.removed_workloads.push_back(id);
      }
    }
    for (const std::string& name : changes.queues) {
      if (const gangsched::Queue* q = s.FindQueue(name)) {
        batch.queues.emplace_back(q->spec, q->created_seq);
        batch.usage.emplace_back(name, s.usage().Named(q->id, s.resources()));
      } else {
        batch.removed_queues.push_back(name);
      }
    }
    for (const std::string& name : changes.nodes) {
      if (const Node* n = s.FindNode(name)) {
        batch.nodes.push_back(SpecOf(s, *n));
      } else {
        batch.removed_nodes.push_back(name);
      }
    }
    if (s.fair_share_epoch() != fair_share_epoch_ || &s != last_leader_) {
      batch.fair_shares = s.FairShares();
      fair_share_epoch_ = s.fair_share_epoch();
      last_leader_ = &s;
    }
    batch.revision = s.revision();
    batch.submit_seq = s.submit_seq();
    return batch;
  }

  // A batch's changes go to the store mirror and to the read replica.
  void Commit(const Scheduler& s) {
    ChangeSet changes = const_cast<Scheduler&>(s).TakeChanges();
    // Every update carries the topologies, as the header does.
    EXPECT_TRUE(replica_->SetTopologies(s.topologies()).ok());
    if (replica_->priority_classes() != s.priority_classes()) {
      EXPECT_TRUE(replica_
                      ->SetPriorityClasses(s.priority_classes(),
                                           s.default_priority_class(),
                                           ClassRemoval::kKeep)
                      .ok());
    }
    absl::Status applied = replica_->ApplyReplica(BatchOf(s, changes));
    EXPECT_TRUE(applied.ok()) << applied;
    mirror_.Apply(s, changes);
  }

  // The read replica reads as the leader does: records, roll-ups, node
  // usage, fair shares, counters and scale hints.
  std::string CheckReplica() const {
    const Scheduler& r = *replica_;
    if (std::string diff = mirror_.Diff(r); !diff.empty())
      return absl::StrCat("replica: ", diff);
    if (absl::Status st = r.CheckConsistency(); !st.ok())
      return absl::StrCat("replica is inconsistent: ", st.message());
    const ResourceTable& lt = s_->resources();
    const ResourceTable& rt = r.resources();
    auto same = [&](const ResourceVector& a, const ResourceVector& b) {
      NamedResources na = lt.ToNamed(a), nb = rt.ToNamed(b);
      std::erase_if(na, [](const auto& e) { return e.second == 0; });
      std::erase_if(nb, [](const auto& e) { return e.second == 0; });
      std::sort(na.begin(), na.end());
      std::sort(nb.begin(), nb.end());
      return na == nb;
    };
    for (const gangsched::Queue& q : s_->queues()) {
      if (!q.live) continue;
      const gangsched::Queue* o = r.FindQueue(q.spec.name);
      if (o == nullptr)
        return absl::StrCat("replica lacks queue ", q.spec.name);
      if (!(s_->usage().Named(q.id, lt) == r.usage().Named(o->id, rt))) {
        return absl::StrCat("replica: usage of queue ", q.spec.name,
                            " differs");
      }
      if (!same(q.allocated, o->allocated) ||
          !same(q.allocated_non_preemptible, o->allocated_non_preemptible) ||
          !same(q.reserved, o->reserved) || !same(q.requested, o->requested) ||
          !same(q.fair_share, o->fair_share) ||
          q.pending_workloads != o->pending_workloads ||
          q.running_workloads != o->running_workloads ||
          q.workload_count != o->workload_count) {
        return absl::StrCat("replica: queue ", q.spec.name,
                            " reads differently");
      }
    }
    for (const Node& n : s_->nodes()) {
      if (!n.live) continue;
      const Node* o = r.FindNode(n.name);
      if (o == nullptr) return absl::StrCat("replica lacks node ", n.name);
      if (!same(n.used, o->used) || !same(n.reserved, o->reserved) ||
          n.pods_used != o->pods_used || n.reserved_pods != o->reserved_pods ||
          n.slots.size() != o->slots.size()) {
        return absl::StrCat("replica: node ", n.name, " reads differently");
      }
    }
    for (const auto& w : s_->workloads()) {
      if (!w) continue;
      const gangsched::Workload* o = r.FindWorkload(w->spec.id);
      if (o == nullptr) return absl::StrCat("replica lacks ", w->spec.id);
      auto hints = [](const std::vector<ScaleHint>& v) {
        std::string out;
        for (const ScaleHint& h : v)
          absl::StrAppend(&out, h.group, "=", h.grantable, " ");
        return out;
      };
      if (hints(s_->ScaleHintsOf(*w)) != hints(r.ScaleHintsOf(*o)))
        return absl::StrCat("replica: scale hints of ", w->spec.id,
                            " differ: ", hints(s_->ScaleHintsOf(*w)), "vs ",
                            hints(r.ScaleHintsOf(*o)), DevicesDump(*s_), " vs ",
                            DevicesDump(r));
      if (s_->EvictionsFor(*w).size() != r.EvictionsFor(*o).size())
        return absl::StrCat("replica: evictions for ", w->spec.id, " differ");
    }
    if (r.revision() != s_->revision()) return "replica: revision differs";
    return "";
  }

  // The mirror equals the live state; a restart from it gives the same.
  std::string CheckStored() {
    if (std::string diff = mirror_.Diff(*s_); !diff.empty())
      return absl::StrCat("store mirror: ", diff);
    return "";
  }
  std::string Restart() {
    std::unique_ptr<Scheduler> restored = mirror_.Restore(*s_, now_);
    restored->TakeWarnings();
    if (absl::Status st = restored->CheckConsistency(); !st.ok())
      return absl::StrCat("restored state is inconsistent: ", st.message());
    // Nothing a restore settles when nothing was stuck: the changes it
    // reports are none, and its records equal the old ones.
    Commit(*restored);
    restored->TakeEvents();
    if (std::string diff = mirror_.Diff(*restored); !diff.empty())
      return absl::StrCat("after a restart: ", diff);
    for (const gangsched::Queue& q : s_->queues()) {
      if (!q.live) continue;
      const gangsched::Queue* r = restored->FindQueue(q.spec.name);
      if (r == nullptr || !(r->allocated == q.allocated) ||
          !(r->allocated_non_preemptible == q.allocated_non_preemptible) ||
          !(r->reserved == q.reserved)) {
        return absl::StrCat("after a restart: queue ", q.spec.name,
                            " roll-ups differ");
      }
    }
    s_ = std::move(restored);
    return "";
  }

  void Operate(int step) {
    int op = Pick(16);
    // PROP_TRACE=1 prints every operation and checks after each one.
    if (getenv("PROP_TRACE")) fprintf(stderr, "step %d op %d\n", step, op);
    switch (op) {
      case 0:
      case 1:
      case 2: {  // submit
        int h = 1 + Pick(2);
        int min = h * Pick(3);
        int desired = min + h * Pick(3);
        if (desired == 0) desired = min = h;
        static const char* kClasses[] = {"train", "build-preemptible", "build",
                                         "inference"};
        std::string id = absl::StrCat("w", step, "-", Pick(1000));
        WorkloadSpec spec = Workload(
            id,
            {Group("head", 0, 1, 1),
             Group("w", 1 + Pick(3), min, desired, desired + h * Pick(2), h)},
            leaves_[Pick(leaves_.size())], kClasses[Pick(4)]);
        MaybeFractional(spec.groups[1]);
        MaybeTolerant(spec.groups[1]);
        MaybeAffine(spec.groups[1]);
        if (Pick(4) == 0) {
          spec.placement.topology_key = "zone";
          spec.placement.required = Pick(2) == 0;
        } else {
          MaybeTopology(spec);
        }
        // A gang of workers alone (a batch job): its pods all alike, which
        // a victim search counts rather than places (PlacedByCount).
        if (Pick(3) == 0) spec.groups.erase(spec.groups.begin());
        if (s_->Submit(spec, now_).ok()) ids_.push_back(id);
        break;
      }
      case 3:  // release everything
        if (!ids_.empty()) {
          std::string id = ids_[Pick(ids_.size())];
          s_->Release(id, {}, false, now_).IgnoreError();
        }
        break;
      case 4:  // a pod failed
        if (!ids_.empty()) {
          s_->Release(ids_[Pick(ids_.size())], {{"w", Pick(6)}}, false, now_)
              .IgnoreError();
        }
        break;
      case 5:
      case 6: {  // the shim confirms an eviction
        for (const auto& w : s_->workloads()) {
          if (!w || w->evictions.empty() || Pick(2)) continue;
          std::string id = w->spec.id;
          std::vector<SlotRef> slots = w->evictions.front().slots;
          ASSERT_TRUE(s_->Release(id, slots, false, now_).ok());
          break;
        }
        break;
      }
      case 7: {  // node comes and goes; its device memory may change
        NodeSpec n = GpuNode(absl::StrCat("n", Pick(6)), 4 * (1 + Pick(2)),
                             {{"zone", Pick(2) ? "a" : "b"}});
        n.gpu_memory = int64_t{20} * Pick(5) * kGi;  // 0 (unknown) to 80Gi
        MaybeTainted(n);
        MaybeGenerational(n);
        MaybeRacked(n);
        s_->UpsertNodes({n}, now_);
        break;
      }
      case 8:
        if (Pick(3) == 0) {
          s_->RemoveNodes({absl::StrCat("n", Pick(6))}, now_);
        } else if (Pick(6) == 0) {  // a config reload changes topologies
          EXPECT_TRUE(s_->SetTopologies(kTopologies[Pick(3)]).ok());
        }
        break;
      case 9:  // spec update: new desired count
        if (!ids_.empty()) {
          const gangsched::Workload* w =
              s_->FindWorkload(ids_[Pick(ids_.size())]);
          if (w && w->state != WorkloadState::kReleased) {
            WorkloadSpec spec = w->spec;
            GroupSpec& g = spec.groups.back();
            int h = g.pods_per_replica;
            g.desired_count = std::min(g.max_count, g.min_count + h * Pick(3));
            s_->Submit(spec, now_).IgnoreError();
          }
        }
        break;
      case 10: {  // queue change (limits only grow, so "over limit" is ours)
        QueueSpec q = s_->FindQueue("team-a")->spec;
        q.resources[0].second.quota = 1000 * Pick(5);
        q.resources[0].second.over_quota_weight = Pick(3);
        // docs/SCHEDULING.md, "Preemption with notice": victims of team-a
        // are told before they go, or not.
        q.preemption_notice = absl::Seconds(30 * Pick(3));
        ASSERT_TRUE(s_->UpsertQueue(q).ok());
        break;
      }
      case 12:  // the admin deletes a queue (refused while it holds work)
        s_->DeleteQueue("tmp").IgnoreError();
        break;
      case 13: {  // ... adds it back, or moves it (under no limit)
        QueueSpec q;
        q.name = "tmp";
        q.parent = Pick(2) ? "dept2" : "";
        q.resources = {{"nvidia.com/gpu", {.quota = 1000 * Pick(3)}}};
        s_->UpsertQueue(q).IgnoreError();
        break;
      }
      case 14:  // resubmit with another priority class
        if (!ids_.empty()) {
          const gangsched::Workload* w =
              s_->FindWorkload(ids_[Pick(ids_.size())]);
          if (w && w->state != WorkloadState::kReleased) {
            static const char* kClasses[] = {"train", "build-preemptible",
                                             "build", "inference"};
            WorkloadSpec spec = w->spec;
            spec.priority_class = kClasses[Pick(4)];
            s_->Submit(spec, now_).IgnoreError();
          }
        }
        break;
      case 15: {  // a config reload drops or restores a class
        std::vector<PriorityClass> classes = DefaultPriorityClasses();
        classes[0].preemption_notice = absl::Seconds(20 * Pick(3));  // train
        if (Pick(2)) classes.erase(classes.begin() + 1);  // build-preemptible
        s_->SetPriorityClasses(classes, "train").IgnoreError();
        break;
      }
      default:  // manual preemption
        if (!ids_.empty()) {
          s_->Preempt(
                ids_[Pick(ids_.size())],
                Pick(2) ? PreemptScope::kWhole : PreemptScope::kElasticOnly,
                Pick(2) == 0, Pick(4) == 0, now_)
              .IgnoreError();
        }
        break;
    }
  }

  // A request's answer in words: everything a dry run must get right.
  static std::string Describe(const AllocateAnswer& a) {
    std::string out =
        absl::StrCat(ToString(a.state), " [", ToString(a.pending.code), ": ",
                     a.pending.message, "] bound:");
    for (const Binding& b : a.bindings)
      absl::StrAppend(&out, " ", b.group, "/", b.index, "@", b.node);
    absl::StrAppend(&out, " nominated:");
    for (const Binding& b : a.nominated)
      absl::StrAppend(&out, " ", b.group, "/", b.index, "@", b.node);
    absl::StrAppend(&out, " evictions:");
    for (const Eviction& e : a.evictions) {
      absl::StrAppend(&out, " ", e.workload, "(", static_cast<int>(e.reason),
                      ",", e.preemptor, ",", absl::FormatTime(e.evict_at), ")");
      for (const SlotRef& r : e.slots)
        absl::StrAppend(&out, " ", r.group, "/", r.index);
    }
    absl::StrAppend(&out, " hints:");
    for (const ScaleHint& h : a.scale_hints)
      absl::StrAppend(&out, " ", h.group, "=", h.grantable);
    return out;
  }

  // A new workload or a spec update of a live one, sometimes with what-if
  // changes (a node added or removed, team-a's quota changed): its dry run
  // changes nothing, and answers what the committed request then answers
  // (the what-if changes and their cycle, then the submit and its cycle), and
  // Explain names the same pending reason. Returns what differed.
  // A fork (Scheduler::Fork) decides as the state was when it was made,
  // however the state changes while it lives (the server's dry runs decide
  // on their fork with no lock held while the core goes on); and the state
  // itself stays whole (Check, by the caller).
  std::string ForkThenChange(int step) {
    static const char* kClasses[] = {"train", "build-preemptible", "build",
                                     "inference"};
    int h = 1 + Pick(2);
    int min = h * (1 + Pick(2));
    WorkloadSpec spec =
        Workload(absl::StrCat("f", step, "-", Pick(1000)),
                 {Group("head", 0, 1, 1),
                  Group("w", 1 + Pick(4), min, min + h, min + h, h)},
                 leaves_[Pick(leaves_.size())], kClasses[Pick(4)]);
    MaybeFractional(spec.groups[1]);
    WhatIf what_if;
    if (Pick(4) == 0 && !s_->nodes().empty()) {
      const Node& n = s_->nodes()[Pick(s_->nodes().size())];
      if (n.live) what_if.remove_nodes.push_back(n.name);
    }
    const absl::Time at = now_;
    absl::StatusOr<AllocateAnswer> then = s_->DryRun(spec, what_if, at);
    std::unique_ptr<Scheduler> fork = s_->Fork();
    std::unique_ptr<Scheduler> second = Pick(2) ? s_->Fork() : nullptr;
    const int changes = 1 + Pick(4);
    for (int i = 0; i < changes; ++i) {
      Step(step);
      if (::testing::Test::HasFatalFailure()) return "a step failed";
    }
    absl::StatusOr<AllocateAnswer> decided =
        fork->DecideDryRun(spec, what_if, at);
    fork.reset();
    if (then.ok() != decided.ok() ||
        (then.ok() ? Describe(*then) != Describe(*decided)
                   : then.status() != decided.status())) {
      return absl::StrCat(
          "\n at the fork: ",
          then.ok() ? Describe(*then) : then.status().ToString(),
          "\n decided later on the fork: ",
          decided.ok() ? Describe(*decided) : decided.status().ToString());
    }
    second.reset();  // the last copy goes after the state changed again
    return "";
  }

  // Explain of a random workload says what the next cycle decides for it
  // (ExplainAnswer::next and its fields); the cycle then runs for real and
  // does exactly that to the workload. Counts each decision in `seen`.
  // Returns what differed.
  std::string ExplainThenCycle(int step, std::map<GangAction, int>& seen) {
    now_ += absl::Seconds(Pick(4) == 0 ? Pick(40) : 1);
    std::string id;
    if (Pick(3) != 0) {
      // Mostly a request the cycle has not seen yet (as a gang that was
      // just submitted, or whose spec changed, is explained).
      WorkloadSpec spec = RandomSpec("e", step);
      if (s_->Submit(spec, now_).ok()) {
        ids_.push_back(spec.id);
        id = spec.id;
      }
    }
    if (id.empty() && !ids_.empty()) id = ids_[Pick(ids_.size())];
    absl::StatusOr<ExplainAnswer> why =
        id.empty() ? absl::NotFoundError("none") : s_->Explain(id, now_);
    s_->RunCycle(now_);
    s_->TakeEvents();
    Commit(*s_);
    if (!why.ok()) {
      return id.empty() || s_->FindWorkload(id) == nullptr
                 ? ""
                 : absl::StrCat("Explain: ", why.status().ToString());
    }
    ++seen[why->next];
    absl::StatusOr<AllocateAnswer> after = s_->Answer(id);
    if (!after.ok()) {
      return why->next == GangAction::kNothing
                 ? ""
                 : absl::StrCat(id,
                                ": gone after the cycle Explain said would ",
                                ToString(why->next), " it");
    }
    auto slots = [](const std::vector<Binding>& bindings) {
      std::set<std::string> out;
      for (const Binding& b : bindings)
        out.insert(absl::StrCat(b.group, "/", b.index, "@", b.node));
      return out;
    };
    auto evicted = [](const std::vector<Eviction>& evictions) {
      std::set<std::string> out;
      for (const Eviction& e : evictions) {
        for (const SlotRef& r : e.slots) {
          out.insert(absl::StrCat(e.workload, " ", r.group, "/", r.index, " ",
                                  static_cast<int>(e.reason)));
        }
      }
      return out;
    };
    const std::set<std::string> bound = slots(after->bindings);
    const std::set<std::string> nominated = slots(after->nominated);
    const std::set<std::string> evictions = evicted(after->evictions);
    auto missing = [](const std::set<std::string>& want,
                      const std::set<std::string>& have) {
      std::vector<std::string> out;
      for (const std::string& x : want) {
        if (!have.contains(x)) out.push_back(x);
      }
      return absl::StrJoin(out, " ");
    };
    const std::string said = absl::StrCat(
        id, ": Explain said ", ToString(why->next), ", the cycle left it ",
        Describe(*after), "\n", why->text, "\n");
    if (why->next_replica) {
      // Its next elastic replica: the cycle grows it by exactly the pods
      // Explain named on the nodes it named, or leaves them unbound.
      if (why->growth_slots.empty()) return absl::StrCat(said, "no replica");
      if (why->next == GangAction::kBind) {
        ++growth_bound_;
      } else {
        std::set<std::string> unbound;
        for (const SlotRef& r : why->growth_slots) {
          for (const std::string& b : bound) {
            if (b.starts_with(absl::StrCat(r.group, "/", r.index, "@")))
              unbound.insert(b);
          }
        }
        if (!unbound.empty()) {
          return absl::StrCat(said,
                              "grown after all: ", absl::StrJoin(unbound, " "));
        }
        ++(why->next_pending.code == PendingCode::kNone ? growth_no_room_
                                                        : growth_refused_);
        return "";
      }
    }
    switch (why->next) {
      case GangAction::kNothing:
        return "";
      case GangAction::kBind:
        if (std::string m = missing(slots(why->next_bindings), bound);
            !m.empty() || why->next_bindings.empty()) {
          return absl::StrCat(said, "not bound: ", m);
        }
        return "";
      case GangAction::kPipeline:
      case GangAction::kConsolidate: {
        std::set<std::string> placed = bound;
        placed.insert(nominated.begin(), nominated.end());
        if (after->state != WorkloadState::kPipelined &&
            after->state != WorkloadState::kRunning) {
          return absl::StrCat(said, "not pipelined");
        }
        if (std::string m = missing(slots(why->next_bindings), placed);
            !m.empty()) {
          return absl::StrCat(said, "not nominated: ", m);
        }
        if (std::string m = missing(evicted(why->would_evict), evictions);
            !m.empty()) {
          return absl::StrCat(said, "not evicted: ", m);
        }
        return "";
      }
      case GangAction::kPending:
        if (why->stale) {
          if (after->state == WorkloadState::kRunning) {
            return absl::StrCat(said, "not expired as stale");
          }
          // Its own slots are being evicted: at least those Explain named
          // (some may have been before).
          size_t named = 0, evicting = 0;
          for (const Eviction& e : why->would_evict) named += e.slots.size();
          for (const GroupState& g : s_->FindWorkload(id)->groups) {
            for (size_t i = 0; i < g.slot_evicting.size(); ++i)
              evicting += g.slot_evicting[i] ? 1 : 0;
          }
          if (named > evicting) {
            return absl::StrCat(said, named, " pods named, ", evicting,
                                " being evicted");
          }
          // Nothing of it waits for room now: no reason is left on it.
          if (!(after->pending == why->next_pending)) {
            return absl::StrCat(said, "a stale gang kept the reason ",
                                ToString(after->pending.code));
          }
          ++stale_explained_;
          return "";
        }
        if (!(after->pending == why->next_pending)) {
          return absl::StrCat(
              said, "Explain's reason: ", ToString(why->next_pending.code),
              ": ", why->next_pending.message);
        }
        return "";
    }
    return "";
  }

  // A cycle before NextCycleDue decides what the last one did: nothing.
  // Runs one on a fork at a random time before the due time (within the
  // hour) and returns what it changed; counts the checks in `checked` and
  // the due times a clock rule set (not the usage refresh) in `timed`.
  std::string CycleBeforeDue(int& checked, int& timed) {
    const absl::Time due = s_->NextCycleDue();
    if (due <= now_) return "";  // the last cycle changed something
    const absl::Duration room = std::min(due - now_, absl::Hours(1));
    const absl::Time at =
        now_ + absl::Milliseconds(
                   Pick(static_cast<int>(absl::ToInt64Milliseconds(room))));
    std::unique_ptr<Scheduler> fork = s_->Fork();
    fork->RunCycle(at);
    ++checked;
    timed += due != s_->usage().NextRefresh();
    const std::vector<Event> events = fork->TakeEvents();
    const ChangeSet changes = fork->TakeChanges();
    if (events.empty() && changes.workloads.empty()) return "";
    std::string out = absl::StrCat(
        "a cycle ", absl::FormatDuration(at - now_), " after the last, ",
        absl::FormatDuration(due - at), " before it was due, changed:");
    for (const Event& e : events)
      absl::StrAppend(&out, " ", e.workload, " (", ToString(e.state), ")");
    for (const std::string& w : changes.workloads)
      absl::StrAppend(&out, " ", w);
    return out;
  }

  // A new gang (head and workers, random sizes, class and leaf), or now and
  // then a spec update of a live one.
  WorkloadSpec RandomSpec(absl::string_view prefix, int step) {
    WorkloadSpec spec;
    const gangsched::Workload* live =
        ids_.empty() ? nullptr : s_->FindWorkload(ids_[Pick(ids_.size())]);
    if (live != nullptr && live->state != WorkloadState::kReleased &&
        Pick(3) == 0) {
      spec = live->spec;
      GroupSpec& g = spec.groups.back();
      g.desired_count =
          std::min(g.max_count, g.min_count + g.pods_per_replica * Pick(3));
    } else {
      static const char* kClasses[] = {"train", "build-preemptible", "build",
                                       "inference"};
      int h = 1 + Pick(2);
      int min = h * (1 + Pick(2));
      int desired = min + h * Pick(2);
      spec = Workload(
          absl::StrCat(prefix, step, "-", Pick(1000)),
          {Group("head", 0, 1, 1),
           Group("w", 1 + Pick(4), min, desired, desired + h * Pick(2), h)},
          leaves_[Pick(leaves_.size())], kClasses[Pick(4)]);
      MaybeFractional(spec.groups[1]);
      if (Pick(4) == 0) {
        spec.placement.topology_key = "zone";
      } else {
        MaybeTopology(spec);
      }
    }
    return spec;
  }

  std::string DryRunThenCommit(int step) {
    now_ += absl::Seconds(Pick(4) == 0 ? Pick(40) : 1);
    WorkloadSpec spec = RandomSpec("d", step);
    WhatIf what_if;
    if (Pick(4) == 0) {
      what_if.upsert_nodes.push_back(GpuNode(absl::StrCat("n", Pick(6)),
                                             4 * (1 + Pick(2)),
                                             {{"zone", Pick(2) ? "a" : "b"}}));
    }
    if (Pick(5) == 0 && !s_->nodes().empty()) {
      const Node& n = s_->nodes()[Pick(s_->nodes().size())];
      bool upserted = !what_if.upsert_nodes.empty() &&
                      what_if.upsert_nodes[0].name == n.name;
      if (n.live && !upserted) what_if.remove_nodes.push_back(n.name);
    }
    if (Pick(5) == 0) {
      QueueSpec q = s_->FindQueue("team-a")->spec;
      q.resources[0].second.quota = 1000 * Pick(5);
      what_if.queues.push_back(q);
    }

    const int64_t revision = s_->revision();
    absl::StatusOr<AllocateAnswer> dry = s_->DryRun(spec, what_if, now_);
    if (s_->revision() != revision) return "the dry run moved the revision";
    if (!s_->TakeEvents().empty()) return "the dry run recorded events";
    if (!s_->TakeChanges().empty()) return "the dry run reported changes";
    if (std::string diff = mirror_.Diff(*s_); !diff.empty())
      return absl::StrCat("the dry run changed the state: ", diff);

    s_->RemoveNodes(what_if.remove_nodes, now_);
    s_->UpsertNodes(what_if.upsert_nodes, now_);
    for (const QueueSpec& q : what_if.queues) {
      if (!s_->UpsertQueue(q).ok()) return "a what-if queue was refused";
    }
    if (!what_if.empty()) s_->RunCycle(now_);  // the changes' own batch
    absl::Status submitted = s_->Submit(spec, now_);
    s_->RunCycle(now_);
    std::string verdict;
    if (dry.ok() != submitted.ok()) {
      verdict = absl::StrCat("dry run: ", dry.status().ToString(),
                             "; committed: ", submitted.ToString());
    } else if (!dry.ok()) {
      if (dry.status() != submitted) {
        verdict = absl::StrCat("dry run: ", dry.status().ToString(),
                               "; committed: ", submitted.ToString());
      }
    } else {
      ids_.push_back(spec.id);
      absl::StatusOr<AllocateAnswer> committed = s_->Answer(spec.id);
      if (!committed.ok()) return "the committed workload is gone";
      if (dry->revision != revision) {
        verdict = "the dry run's revision is not the current one";
      } else if (Describe(*dry) != Describe(*committed)) {
        verdict = absl::StrCat("\n dry run:   ", Describe(*dry),
                               "\n committed: ", Describe(*committed));
      }
    }
    s_->TakeEvents();
    Commit(*s_);
    return verdict;
  }

  // Every invariant; returns a description of the first broken one.
  std::string Check() const {
    // A notice's time used is part of the time given, and its pods that
    // went early are some of those told (counted by this process only).
    const NoticeStats& notices = s_->notice_stats();
    if (notices.used > notices.given ||
        notices.pods_released_early > notices.pods_noticed) {
      return absl::StrCat("notices: used ", absl::FormatDuration(notices.used),
                          " of ", absl::FormatDuration(notices.given), ", ",
                          notices.pods_released_early, " of ",
                          notices.pods_noticed, " pods early");
    }
    std::map<uint32_t, ResourceVector> used, reserved;
    std::map<uint32_t, ResourceVector> allocated;
    for (const auto& w : s_->workloads()) {
      if (!w) continue;
      // docs/SCHEDULING.md, "Preemption with notice": only preemption,
      // reclaim and moves give one; a workload is told once (every notice
      // it is under has one deadline); a deadline follows its notice.
      std::optional<absl::Time> told;
      for (const Eviction& e : w->evictions) {
        if (!e.HasNotice()) continue;
        if (e.reason != EvictionReason::kPreempt &&
            e.reason != EvictionReason::kReclaim &&
            e.reason != EvictionReason::kConsolidate) {
          return absl::StrCat(w->spec.id, ": a ", ToString(e.reason),
                              " eviction has a notice");
        }
        if (e.evict_at < e.noticed ||
            e.evict_at - e.noticed > kMaxPreemptionNotice) {
          return absl::StrCat(w->spec.id, ": a notice of ",
                              absl::FormatDuration(e.evict_at - e.noticed));
        }
        if (told && *told != e.evict_at)
          return absl::StrCat(w->spec.id, ": told twice");
        told = e.evict_at;
      }
      int32_t bound = w->BoundPods();
      int32_t nominated = 0;
      for (const auto& g : w->groups) {
        for (size_t i = 0; i < g.slot_node.size(); ++i) {
          if (g.slot_node[i].valid()) used[g.slot_node[i].value()] += g.pod;
          if (g.slot_nominated[i].valid()) {
            reserved[g.slot_nominated[i].value()] += g.pod;
            ++nominated;
          }
          if (g.slot_evicting[i] && !g.slot_node[i].valid()) {
            return absl::StrCat(w->spec.id, ": evicting slot ", i,
                                " is not bound");
          }
        }
      }
      for (QueueId q = w->queue; q.valid();
           q = s_->queues()[q.value()].parent) {
        allocated[q.value()] += w->BoundResources();
      }
      switch (w->state) {
        case WorkloadState::kPending:
          if (bound != 0 || nominated != 0) {
            return absl::StrCat(w->spec.id, ": PENDING but holds ", bound,
                                " pods, ", nominated, " nominations");
          }
          break;
        case WorkloadState::kPipelined:
          if (bound != 0 || nominated == 0) {
            return absl::StrCat(w->spec.id, ": PIPELINED with ", bound,
                                " bound, ", nominated, " nominated");
          }
          break;
        case WorkloadState::kRunning:
          if (!w->AtMinimum() &&
              now_ - w->below_min_since >= s_->options().stale_gang_grace) {
            return absl::StrCat(w->spec.id,
                                ": RUNNING below its minimum past the grace");
          }
          break;
        case WorkloadState::kReleased:
          if (bound != 0)
            return absl::StrCat(w->spec.id, ": RELEASED but holds pods");
          break;
        default:
          break;
      }
    }
    for (uint32_t id = 0; id < s_->nodes().size(); ++id) {
      const Node& n = s_->nodes()[id];
      if (!n.live) continue;
      if (!n.used.FitsIn(n.allocatable))
        return absl::StrCat(n.name, " is over allocatable");
      size_t bound_here = 0;
      for (const auto& w : s_->workloads()) {
        if (!w) continue;
        for (const auto& g : w->groups) {
          for (NodeId slot_node : g.slot_node)
            bound_here += slot_node.value() == id;
        }
      }
      if (bound_here != n.slots.size()) {
        return absl::StrCat(n.name, ": ", n.slots.size(), " slot keys for ",
                            bound_here, " bound slots");
      }
      for (const SlotKey& key : n.slots) {
        const auto& w = s_->workloads()[key.workload.value()];
        if (!w || key.group >= w->groups.size() ||
            key.index >=
                static_cast<int32_t>(w->groups[key.group].slot_node.size()) ||
            w->groups[key.group].slot_node[key.index].value() != id) {
          return absl::StrCat(n.name, ": stale slot key");
        }
      }
      if (!(n.used == used[id])) {
        return absl::StrCat(n.name, ": used does not add up: gpu ",
                            n.used.Get(kGpu), " vs ", used[id].Get(kGpu),
                            ", cpu ", n.used.Get(kCpu), " vs ",
                            used[id].Get(kCpu));
      }
      if (!(n.reserved == reserved[id]))
        return absl::StrCat(n.name, ": reserved does not add up");
    }
    ResourceVector total;
    for (const Node& n : s_->nodes()) {
      if (n.live && n.schedulable) total += n.allocatable;
    }
    std::map<uint32_t, ResourceVector> children_share;
    ResourceVector top_share;
    for (const Queue& q : s_->queues()) {
      if (!q.live) continue;
      if (!(q.allocated == allocated[q.id.value()])) {
        return absl::StrCat("queue ", q.spec.name,
                            ": allocated does not add up");
      }
      int64_t limit = q.LimitOf(kGpu);
      if (limit != kUnlimited && q.allocated.Get(kGpu) > limit) {
        return absl::StrCat("queue ", q.spec.name, " is over its limit");
      }
      if (q.parent.valid()) {
        children_share[q.parent.value()] += q.fair_share;
      } else {
        top_share += q.fair_share;
      }
    }
    // Shares were computed at the start of the cycle; nodes removed in it
    // can make `total` smaller since, so compare against what was divided.
    for (const Queue& q : s_->queues()) {
      if (q.live && !children_share[q.id.value()].FitsIn(q.fair_share)) {
        return absl::StrCat("children of ", q.spec.name,
                            " share more than it has");
      }
    }
    (void)top_share;
    if (absl::Status s = s_->CheckConsistency(); !s.ok())
      return std::string(s.message());
    return "";
  }

  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  std::mt19937 rng_;
  std::unique_ptr<Scheduler> s_;  // a restart replaces it
  Mirror mirror_;
  // Fed every batch, as a frontend's read cache is; never restarted.
  std::unique_ptr<Scheduler> replica_ = std::make_unique<Scheduler>();
  uint64_t fair_share_epoch_ = 0;
  int moved_ = 0;
  const Scheduler* last_leader_ = nullptr;
  std::vector<std::string> leaves_;
  std::vector<std::string> ids_;
  int stale_explained_ = 0;  // ExplainThenCycle: stale expiries foretold
  // ExplainThenCycle: next elastic replicas foretold bound, refused by a
  // queue check, and left for want of room.
  int growth_bound_ = 0, growth_refused_ = 0, growth_no_room_ = 0;
};

// The seeds a property test walks: its usual number of sequences from seed
// 1, unless the environment says otherwise. PROP_SEQUENCES=N runs N (by
// hand); PROP_SCALE=F runs F times the usual number; PROP_FIRST_SEED=S
// starts at S. ctest's sanitized run takes a third of each test's
// sequences, on seeds the Release run does not walk (tests/CMakeLists.txt).
struct Seeds {
  uint32_t first = 1;
  int count = 0;
  uint32_t end() const { return first + static_cast<uint32_t>(count); }
};

Seeds SeedsFor(int usual) {
  Seeds seeds;
  seeds.count = usual;
  if (const char* n = getenv("PROP_SEQUENCES")) {
    seeds.count = atoi(n);
  } else if (const char* f = getenv("PROP_SCALE")) {
    seeds.count = std::max(1, static_cast<int>(usual * atof(f)));
  }
  if (const char* first = getenv("PROP_FIRST_SEED"))
    seeds.first = static_cast<uint32_t>(atoi(first));
  return seeds;
}

// For any request in any state the random operations reach, a dry run
// answers exactly what the committed request then answers (bindings,
// nominations, evictions, state, pending reason, scale hints; the revision
// aside), with and without what-if changes, and commits nothing.
TEST(PropertyTest, ADryRunAnswersWhatTheCommittedRequestDoes) {
  const Seeds seeds = SeedsFor(600);
  const int kSequences = seeds.count;
  constexpr int kSteps = 40;
  int compared = 0;
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    RandomRun run(seed);
    run.AddFirstNodes();
    for (int step = 0; step < kSteps; ++step) {
      if (run.Pick(3) == 0) {
        ASSERT_EQ(run.DryRunThenCommit(step), "")
            << "seed " << seed << " step " << step;
        ++compared;
      } else {
        run.Step(step);
      }
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(run.Check(), "") << "seed " << seed << " step " << step;
    }
  }
  EXPECT_GT(compared, kSequences * kSteps / 4);
}

// Explain's decision for any workload in any state the random operations
// reach is the next cycle's: what it says the cycle binds, nominates,
// evicts, or which reason it gives, the cycle then does (checked on the
// decision, not on text).
TEST(PropertyTest, ExplainSaysWhatTheNextCycleDecides) {
  const Seeds seeds = SeedsFor(600);
  const int kSequences = seeds.count;
  constexpr int kSteps = 40;
  std::map<GangAction, int> seen;
  int stale = 0;
  int growth_bound = 0, growth_refused = 0, growth_no_room = 0;
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    RandomRun run(seed);
    run.AddFirstNodes();
    for (int step = 0; step < kSteps; ++step) {
      if (run.Pick(2) == 0) {
        ASSERT_EQ(run.ExplainThenCycle(step, seen), "")
            << "seed " << seed << " step " << step;
      } else {
        run.Step(step);
      }
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(run.Check(), "") << "seed " << seed << " step " << step;
    }
    stale += run.stale_explained_;
    growth_bound += run.growth_bound_;
    growth_refused += run.growth_refused_;
    growth_no_room += run.growth_no_room_;
  }
  EXPECT_GT(stale, 0);  // a lost gang past its grace, foretold
  // Elastic growth foretold, each way.
  EXPECT_GT(growth_bound, 0);
  EXPECT_GT(growth_refused, 0);
  EXPECT_GT(growth_no_room, 0);
  std::printf("growth: %d bound, %d refused, %d without room\n", growth_bound,
              growth_refused, growth_no_room);
  // Every kind of decision was compared, many times over (about 2,500
  // binds, 4,400 pending, 290 pipelined and 17 consolidations in 600
  // sequences).
  for (GangAction action : {GangAction::kBind, GangAction::kPending}) {
    EXPECT_GT(seen[action], kSequences / 2) << ToString(action);
  }
  EXPECT_GT(seen[GangAction::kPipeline], kSequences / 3);
  EXPECT_GT(seen[GangAction::kConsolidate], kSequences / 100);
}

// The server skips a tick's cycle until NextCycleDue (docs/ARCHITECTURE.md,
// "Event-driven cycles"): in any state the random operations reach, a
// cycle run before then records no event and changes no workload.
TEST(PropertyTest, ACycleBeforeItIsDueChangesNothing) {
  const Seeds seeds = SeedsFor(600);
  const int kSequences = seeds.count;
  constexpr int kSteps = 40;
  int checked = 0;
  int timed = 0;
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    RandomRun run(seed);
    run.AddFirstNodes();
    for (int step = 0; step < kSteps; ++step) {
      run.Step(step);
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(run.CycleBeforeDue(checked, timed), "")
          << "seed " << seed << " step " << step;
    }
  }
  // Most states are quiet after their cycle, and many wait on a clock rule
  // (a stale gang's grace, a min runtime) rather than the usage refresh.
  EXPECT_GT(checked, kSequences * kSteps / 4);
  EXPECT_GT(timed, kSequences);
}

TEST(PropertyTest, AForkDecidesAsTheStateWasWhenItWasMade) {
  const Seeds seeds = SeedsFor(300);
  const int kSequences = seeds.count;
  constexpr int kSteps = 30;
  int forked = 0;
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    RandomRun run(seed + 50000);
    run.AddFirstNodes();
    for (int step = 0; step < kSteps; ++step) {
      if (run.Pick(3) == 0) {
        ASSERT_EQ(run.ForkThenChange(step), "")
            << "seed " << seed << " step " << step;
        ++forked;
      } else {
        run.Step(step);
      }
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(run.Check(), "") << "seed " << seed << " step " << step;
    }
  }
  EXPECT_GT(forked, kSequences * kSteps / 5);
}

// Cycles skip the settled workloads (to_visit_). The same random
// operations on a scheduler that walks every active workload, the way
// cycles did before, must give the same stored state and the same events
// after every step, restarts included.
// Two runs of the same random sequence decide exactly the same, restarts
// included: `fast` with the shortcut under test, `full` without it.
void DecideTheSame(uint32_t seed, RandomRun& fast, RandomRun& full) {
  constexpr int kSteps = 40;
  fast.AddFirstNodes();
  full.AddFirstNodes();
  for (int step = 0; step < kSteps; ++step) {
    fast.Step(step);
    full.Step(step);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(fast.mirror_.Diff(*full.s_), "")
        << "seed " << seed << " step " << step;
    ASSERT_EQ(fast.s_->revision(), full.s_->revision())
        << "seed " << seed << " step " << step;
    if (fast.Pick(6) == 0) {
      full.Pick(6);  // the same draws on both sides
      ASSERT_EQ(fast.Restart(), "") << "seed " << seed << " step " << step;
      ASSERT_EQ(full.Restart(), "") << "seed " << seed << " step " << step;
    } else {
      full.Pick(6);
    }
  }
}

// core/domain_cache.h: gang searches that walk the kept domain orders
// decide as those that list every domain of a level.
TEST(PropertyTest, KeptDomainOrdersDecideAsListingThem) {
  const Seeds seeds = SeedsFor(600);
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    RandomRun kept(seed),
        listed(seed, /*walk_every_active=*/false, /*cache_domains=*/false);
    DecideTheSame(seed, kept, listed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// core/kept_reasons.h: a gang's first placement that counts why the nodes
// turn its pod away from the reasons kept across cycles says what walking
// every node says (the pending messages are part of the state compared).
TEST(PropertyTest, KeptRejectionCountsSayWhatCountingSays) {
  const Seeds seeds = SeedsFor(600);
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    RandomRun kept(seed), counted(seed, /*walk_every_active=*/false,
                                  /*cache_domains=*/true,
                                  /*keep_reasons=*/false);
    DecideTheSame(seed, kept, counted);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// core/gang_placer.h, PlacedByCount: a victim search that prunes its
// victims on the count of pods the nodes take, where that count is the
// placer's answer, chooses the victims one that asks the placer at every
// step chooses.
TEST(PropertyTest, VictimsPrunedOnCountsAreThoseThePlacerPrunes) {
  const Seeds seeds = SeedsFor(600);
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    RandomRun counted(seed),
        placed(seed, /*walk_every_active=*/false, /*cache_domains=*/true,
               /*keep_reasons=*/true, /*count_victim_fits=*/false);
    DecideTheSame(seed, counted, placed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// core/order.h: the fair-share order plays a queue's children off in
// pairs and, after a pick, only the pairs on the picked path; playing every
// child of every queue on that path again (as it did before) must pick in
// the same order. Random trees of one to three levels, 1 to 11 children a
// queue, random quotas, limits and priorities, gangs and elastic workloads
// in random leaves on too few nodes, releases in between: the events (who
// was bound where, in which order, who waits why) must be the same.
TEST(PropertyTest, TheFairShareTournamentPicksAsPlayingEveryChild) {
  const Seeds seeds = SeedsFor(300);
  const int kSequences = seeds.count;
  int64_t bound = 0;
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) {
      return static_cast<int>(
          std::uniform_int_distribution<int>(0, n - 1)(rng));
    };
    Scheduler pairs;
    Scheduler whole(SchedulerOptions{.play_whole_matches = true});
    std::vector<QueueSpec> queues;
    std::vector<std::string> leaves;
    auto add_queue = [&](const std::string& name, const std::string& parent) {
      QueueSpec q =
          testing::GpuQueue(name, pick(4) == 0 ? kUnlimited : pick(24),
                            pick(5) == 0 ? 8 + pick(32) : kUnlimited, parent);
      q.priority = 100 + 10 * pick(3);
      queues.push_back(q);
    };
    std::function<void(const std::string&, int)> grow =
        [&](const std::string& parent, int depth) {
          const int children = 1 + pick(parent.empty() ? 4 : 11);
          for (int c = 0; c < children; ++c) {
            std::string name =
                absl::StrCat(parent.empty() ? "q" : parent, "-", c);
            add_queue(name, parent);
            if (depth < 3 && pick(3) == 0) {
              grow(name, depth + 1);
            } else {
              leaves.push_back(name);
            }
          }
        };
    grow("", 1);
    std::vector<NodeSpec> nodes;
    const int node_count = 3 + pick(12);
    for (int i = 0; i < node_count; ++i)
      nodes.push_back(testing::GpuNode(absl::StrCat("n", i), 8));
    absl::Time now = absl::FromUnixSeconds(1000);
    for (Scheduler* s : {&pairs, &whole}) {
      for (const QueueSpec& q : queues) ASSERT_TRUE(s->UpsertQueue(q).ok());
      s->UpsertNodes(nodes, now);
    }
    std::vector<std::string> submitted;
    for (int step = 0; step < 8; ++step) {
      const int arrivals = 1 + pick(12);
      for (int a = 0; a < arrivals; ++a) {
        const std::string id = absl::StrCat("w", step, "-", a);
        const int min = 1 + pick(4);
        WorkloadSpec spec = testing::Workload(
            id,
            {testing::Group("workers", 1 + pick(8), min,
                            pick(3) == 0 ? min + pick(6) : min)},
            leaves[pick(static_cast<int>(leaves.size()))]);
        for (Scheduler* s : {&pairs, &whole})
          ASSERT_TRUE(s->Submit(spec, now).ok());
        submitted.push_back(id);
      }
      for (int r = pick(4); r > 0 && !submitted.empty(); --r) {
        const int at = pick(static_cast<int>(submitted.size()));
        for (Scheduler* s : {&pairs, &whole})
          s->Release(submitted[at], {}, /*shrink=*/false, now).IgnoreError();
        submitted.erase(submitted.begin() + at);
      }
      pairs.RunCycle(now);
      whole.RunCycle(now);
      std::vector<Event> a = pairs.TakeEvents();
      std::vector<Event> b = whole.TakeEvents();
      auto text = [&](const std::vector<Event>& events) {
        std::string out;
        for (const Event& e : events) {
          absl::StrAppend(&out, static_cast<int>(e.type), " ", e.workload, " ",
                          static_cast<int>(e.state), " ",
                          static_cast<int>(e.pending.code), ":");
          for (const Binding& bind : e.bindings) {
            absl::StrAppend(&out, " ", bind.node);
            if (e.type == EventType::kBound) ++bound;
          }
          out += "\n";
        }
        return out;
      };
      ASSERT_EQ(text(a), text(b)) << "seed " << seed << " step " << step;
      now += absl::Seconds(1);
    }
  }
  EXPECT_GT(bound, kSequences * 10) << "pods bound across the runs";
}

TEST(PropertyTest, SkippingSettledWorkloadsDecidesTheSame) {
  const Seeds seeds = SeedsFor(600);
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    RandomRun fast(seed), full(seed, /*walk_every_active=*/true);
    DecideTheSame(seed, fast, full);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(PropertyTest, RandomSequencesKeepEveryInvariant) {
  // (ctest's sanitized run takes its third in two halves, side by side.)
  const Seeds seeds = SeedsFor(3000);
  const int kSequences = seeds.count;
  constexpr int kSteps = 40;
  int moved = 0;
  for (uint32_t seed = seeds.first; seed < seeds.end(); ++seed) {
    if (getenv("PROP_TRACE")) fprintf(stderr, "seed %u\n", seed);
    RandomRun run(seed);
    run.AddFirstNodes();
    for (int step = 0; step < kSteps; ++step) {
      run.Step(step);
      if (::testing::Test::HasFatalFailure()) return;
      std::string broken = run.Check();
      ASSERT_EQ(broken, "") << "seed " << seed << " step " << step;
      broken = run.CheckStored();
      ASSERT_EQ(broken, "") << "seed " << seed << " step " << step;
      broken = run.CheckReplica();
      ASSERT_EQ(broken, "") << "seed " << seed << " step " << step;
      if (run.Pick(6) == 0) {
        broken = run.Restart();
        ASSERT_EQ(broken, "") << "seed " << seed << " step " << step;
        ASSERT_EQ(run.Check(), "") << "seed " << seed << " step " << step;
      }
    }
    moved += run.moved();
  }
  EXPECT_GT(moved, kSequences / 100) << "consolidations seen";
}

}  // namespace
}  // namespace gangsched
