#include "core/gang_placer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <forward_list>
#include <limits>
#include <map>
#include <optional>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/domain_cache.h"
#include "core/node_filter.h"
#include "core/placement_strategy.h"
#include "core/quantity.h"
#include "core/small_id_map.h"
#include "core/taints.h"

namespace gangsched {
namespace {

// The resource a pod is packed by: GPUs for GPU pods (pods that ask GPU
// memory too, docs/SCHEDULING.md, "GPU memory"), cpu otherwise.
ResourceId KeyResource(const ResourceVector& pod) {
  return pod.Get(kGpu) > 0 || AsksGpuMemory(pod) ? kGpu : kCpu;
}

// A topology domain: the nodes whose values of levels 0..level make `path`
// (core/topology.h). With a topology index that keeps the level's key,
// membership is an integer compare (ids), else a label lookup. Levels and
// path are views of the request's and the nodes' (or the topology index's,
// or the placement's own) strings, which outlive a placement.
struct DomainFilter {
  const std::vector<std::string>* levels;
  int32_t level;
  absl::string_view path;
  uint32_t key_id = TopologyIndex::kNoDomain;
  uint32_t domain_id = TopologyIndex::kNoDomain;
};

// The topology index's key of a level, if it keeps one.
std::optional<uint32_t> LevelKeyId(const TopologyIndex* topology,
                                   const std::vector<std::string>& levels,
                                   int32_t level) {
  if (topology == nullptr) return std::nullopt;
  if (level == 0) return topology->FindKey(levels[0]);
  return topology->FindKey(LevelKey(levels, level));
}

DomainFilter MakeFilter(const TopologyIndex* topology,
                        const std::vector<std::string>& levels, int32_t level,
                        absl::string_view path) {
  DomainFilter filter{&levels, level, path};
  if (std::optional<uint32_t> k = LevelKeyId(topology, levels, level)) {
    const uint32_t d = topology->FindDomain(*k, path);
    if (d != TopologyIndex::kNoDomain) {
      filter.key_id = *k;
      filter.domain_id = d;
    }
  }
  return filter;
}

// Holds the placer's own strings (paths joined from labels when no index
// has them), stable while the placement runs; empty, it allocates nothing.
using PathStore = std::forward_list<std::string>;

// Why a node cannot take a pod; counted per reason without building a
// string for every rejected node.
struct Rejection {
  const char* reason;
  ResourceId resource;  // for "insufficient <resource>"
  // For kTaint: the node's taint and the group that does not tolerate it
  // (for kAffinity, the group), until Reject() turns them into `detail`, an
  // index into the attempt's texts plus one (the same taint on many nodes
  // is one reason).
  const Taint* taint = nullptr;
  uint32_t group = 0;
  uint32_t detail = 0;
  bool operator==(const Rejection&) const = default;
};
constexpr const char* kInsufficient = "insufficient ";
constexpr const char* kTaint = "taint";
constexpr const char* kAffinity = "affinity";
constexpr const char* kSelector = "node selector mismatch";
// Outside the topology domain a placement keeps to: never counted.
constexpr const char* kOutside = "outside the topology domain";
// Past this JudgeCost a node's filter verdict is remembered per attempt.
constexpr int64_t kRememberVerdictCost = 8;
constexpr const char* kNoDevice = "no GPU device with room";
constexpr const char* kNotShared = "GPUs not shared (no whole-GPU devices)";
constexpr const char* kSmallDevices =
    "GPU devices too small for the pod's GPU memory (or their memory not "
    "reported)";

// Per GPU device of one node: what an attempt booked there (victims' freed
// room reads as negative).
using DeviceDelta = absl::InlinedVector<int32_t, 8>;

// The resources a domain's sums are checked on, the pods' key resource
// first: whether a domain can hold pods at all, before trying it.
constexpr size_t kChecked = 3;
using Checked = std::array<ResourceId, kChecked>;
Checked CheckedFor(ResourceId key) {
  return key == kGpu ? Checked{kGpu, kCpu, kMemory}
                     : Checked{kCpu, kMemory, kGpu};
}

// What some pods need of the Checked resources, at least (0: nothing to
// check).
struct Need {
  Checked resource;
  std::array<int64_t, kChecked> amount;
};

// A domain of one level: `free` (of the key resource) orders the domains to
// try; `room`, per Checked resource, bounds what the domain can take (it is
// never less than what its nodes can give a pod together).
struct DomainRoom {
  absl::string_view path;
  int64_t free;
  std::array<int64_t, kChecked> room;
};
// Zones and racks are few enough per level that the usual case stays off
// the heap.
using DomainRooms = absl::InlinedVector<DomainRoom, 8>;

// The first Checked resource the domain has less of than `need`, or -1.
int Lacking(const DomainRoom& d, const Need& need) {
  for (size_t i = 0; i < kChecked; ++i) {
    if (need.amount[i] > 0 && d.room[i] < need.amount[i])
      return static_cast<int>(i);
  }
  return -1;
}

// The domains of `level`, each with the free key resource (`checked[0]`)
// of its live nodes: allocatable, less usage (unless options.ignore_usage)
// and reservations (when `reserved`, unless options.ignore_reserved), less
// what `booked` holds per node id. From the topology index when it keeps
// the level, else from a scan of the nodes' labels. Unordered.
//
// `room` leaves out the reservations (a node whose victims still run has
// its room both used and reserved: it would count less than nothing) and
// counts options.freed the way that can only add: the room victims free
// when `booked` leaves it out (`freed_in_booked` false), the room others
// take (a consolidation's) when `booked` holds it as a booking.
DomainRooms DomainsAt(const NodeTable& nodes, const PlacerOptions& options,
                      const std::vector<std::string>& levels, int32_t level,
                      const Checked& checked, bool reserved,
                      const SmallIdMap<ResourceVector>& booked,
                      bool freed_in_booked, PathStore& store) {
  using Amounts = std::array<int64_t, kChecked>;
  const ResourceId key = checked[0];
  const bool less_reserved =
      !options.ignore_usage && reserved && !options.ignore_reserved;
  auto base_of = [&](const auto& n) {  // a Node or a domain's sums
    Amounts amounts;
    for (size_t i = 0; i < kChecked; ++i) {
      amounts[i] = n.allocatable.Get(checked[i]);
      if (!options.ignore_usage) amounts[i] -= n.used.Get(checked[i]);
    }
    return amounts;
  };
  auto reserved_of = [&](const auto& n) {
    return less_reserved ? n.reserved.Get(key) : int64_t{0};
  };
  auto less = [&](Amounts& amounts, const ResourceVector& by) {
    for (size_t i = 0; i < kChecked; ++i) amounts[i] -= by.Get(checked[i]);
  };
  // What one entry of options.freed adds to `room`.
  auto adds = [&](Amounts& room, const FreedRoom& f) {
    for (size_t i = 0; i < kChecked; ++i) {
      const int64_t amount = f.resources.Get(checked[i]);
      room[i] += freed_in_booked ? std::max<int64_t>(-amount, 0)
                                 : std::max<int64_t>(amount, 0);
    }
  };
  DomainRooms out;
  std::optional<uint32_t> key_id = LevelKeyId(options.topology, levels, level);
  if (options.topology != nullptr && level == 0 && !key_id) return out;
  if (!key_id) {
    absl::flat_hash_map<absl::string_view, size_t> at;  // path -> out[i]
    std::string joined;
    auto domain_of = [&](const Node& node) -> absl::string_view {
      if (level == 0) return node.Label(levels[0]);
      joined = PathOf(node, levels, level);
      return joined;
    };
    auto entry = [&](absl::string_view path) -> DomainRoom& {
      if (auto it = at.find(path); it != at.end()) return out[it->second];
      if (level > 0) path = store.emplace_front(path);
      at.emplace(path, out.size());
      return out.emplace_back(DomainRoom{path, 0, {}});
    };
    for (uint32_t id = 0; id < nodes.size(); ++id) {
      const Node& node = nodes[id];
      if (!node.live) continue;
      absl::string_view path = domain_of(node);
      if (path.empty()) continue;
      Amounts amounts = base_of(node);
      if (const ResourceVector* held = booked.Find(id)) less(amounts, *held);
      DomainRoom& d = entry(path);
      d.free += amounts[0] - reserved_of(node);
      for (size_t i = 0; i < kChecked; ++i) d.room[i] += amounts[i];
    }
    if (options.freed != nullptr) {
      for (const FreedRoom& f : *options.freed) {
        const Node& node = nodes[f.node.value()];
        if (!node.live) continue;  // in no domain, as in the index
        absl::string_view path = domain_of(node);
        if (auto it = at.find(path); it != at.end())
          adds(out[it->second].room, f);
      }
    }
    return out;
  }
  const auto& domains = options.topology->Domains(*key_id);
  // What `booked` holds per domain; none when nothing is booked (a gang's
  // own domain search).
  absl::InlinedVector<Amounts, 8> held(booked.empty() ? 0 : domains.size(),
                                       Amounts{});
  booked.ForEach([&](uint32_t id, const ResourceVector& amount) {
    uint32_t d = options.topology->DomainOf(*key_id, id);
    if (d == TopologyIndex::kNoDomain) return;
    for (size_t i = 0; i < kChecked; ++i) held[d][i] += amount.Get(checked[i]);
  });
  absl::InlinedVector<Amounts, 8> given(
      options.freed != nullptr ? domains.size() : 0, Amounts{});
  if (options.freed != nullptr) {
    for (const FreedRoom& f : *options.freed) {
      uint32_t d = options.topology->DomainOf(*key_id, f.node.value());
      if (d != TopologyIndex::kNoDomain) adds(given[d], f);
    }
  }
  out.resize(domains.size());
  size_t n = 0;
  for (uint32_t d = 0; d < domains.size(); ++d) {
    if (domains[d].nodes == 0) continue;
    DomainRoom& room = out[n++];
    room.path = domains[d].value;
    room.room = base_of(domains[d]);
    if (!held.empty()) {
      for (size_t i = 0; i < kChecked; ++i) room.room[i] -= held[d][i];
    }
    room.free = room.room[0] - reserved_of(domains[d]);
    if (!given.empty()) {
      for (size_t i = 0; i < kChecked; ++i) room.room[i] += given[d][i];
    }
  }
  out.resize(n);
  return out;
}

// Whether domain `a` comes after `b` in the order to try them: least free
// first (bin-packing: the fullest domain that fits), most free first
// (spreading), then by path.
struct DomainAfter {
  bool spread;
  bool operator()(const DomainRoom& a, const DomainRoom& b) const {
    if (a.free != b.free) return spread ? a.free < b.free : a.free > b.free;
    return a.path > b.path;
  }
};

void OrderDomains(DomainRooms& domains, bool spread) {
  std::sort(
      domains.begin(), domains.end(),
      [after = DomainAfter{spread}](const DomainRoom& a, const DomainRoom& b) {
        return after(b, a);
      });
}

// The domains in that order one at a time, for a search that stops at the
// first that fits: the first found in one pass (it usually fits), the rest
// heaped, so that they are never sorted (a gang tried over hundreds of
// racks usually takes the first).
class DomainOrder {
 public:
  DomainOrder(DomainRooms& domains, bool spread)
      : domains_(domains), end_(domains.size()), after_{spread} {}
  // The next domain, or null after the last; what it points to stays.
  const DomainRoom* Next() {
    if (end_ == 0) return nullptr;
    const auto begin = domains_.begin();
    if (!heaped_ && !first_taken_) {
      first_taken_ = true;
      auto first = std::min_element(
          begin, begin + end_, [&](const DomainRoom& a, const DomainRoom& b) {
            return after_(b, a);
          });
      std::iter_swap(first, begin + (end_ - 1));
      return &domains_[--end_];
    }
    if (!heaped_) {
      std::make_heap(begin, begin + end_, after_);
      heaped_ = true;
    }
    std::pop_heap(begin, begin + end_, after_);
    return &domains_[--end_];
  }

 private:
  DomainRooms& domains_;
  size_t end_;
  DomainAfter after_;
  bool first_taken_ = false;
  bool heaped_ = false;
};

// Drops the domains that cannot hold `need`.
void DropSmall(DomainRooms& domains, const Need& need) {
  domains.erase(std::remove_if(
                    domains.begin(), domains.end(),
                    [&](const DomainRoom& d) { return Lacking(d, need) >= 0; }),
                domains.end());
}

// The domains of one level one at a time, in the order to try them, less
// those that cannot hold `drop` (when given): listed (DomainsAt), or walked
// off a kept BINPACK order (core/domain_cache.h), which gives the same
// domains in the same order without listing the level's every domain.
class DomainWalk {
 public:
  DomainWalk(DomainRooms domains, bool spread, const Need* drop)
      : domains_(std::move(domains)) {
    if (drop != nullptr) DropSmall(domains_, *drop);
    order_.emplace(domains_, spread);
  }
  DomainWalk(const DomainCache::Order& order,
             const CowTable<TopologyIndex::Domain>& domains, const Need* drop)
      : cached_(&order), index_domains_(&domains), drop_(drop) {
    // Below the need of the key resource, every domain lacks it.
    next_ = drop != nullptr && drop->amount[0] > 0
                ? order.entries.lower_bound(
                      DomainCache::Entry{drop->amount[0], 0, 0})
                : order.entries.begin();
  }
  DomainWalk(const DomainWalk&) = delete;
  DomainWalk& operator=(const DomainWalk&) = delete;

  // The next domain, or null after the last; valid until the next call.
  const DomainRoom* Next() {
    if (order_) return order_->Next();
    for (; next_ != cached_->entries.end(); ++next_) {
      const auto [free, rank, d] = *next_;
      current_ = DomainRoom{(*index_domains_)[d].value, free, cached_->room[d]};
      if (drop_ != nullptr && Lacking(current_, *drop_) >= 0) continue;
      ++next_;
      return &current_;
    }
    return nullptr;
  }

 private:
  DomainRooms domains_;
  std::optional<DomainOrder> order_;
  const DomainCache::Order* cached_ = nullptr;
  const CowTable<TopologyIndex::Domain>* index_domains_ = nullptr;
  const Need* drop_ = nullptr;
  absl::btree_set<DomainCache::Entry>::const_iterator next_;
  DomainRoom current_{};
};

// What `pods` pods of `group` need of the resources CheckedFor(key). A pod
// that asks GPU memory needs GPU room the sums do not count (its device
// share is worked out per node): none is counted, which only makes the
// need smaller, never wrong.
Need NeedOfPods(const PlacementGroup& group, int64_t pods, ResourceId key) {
  Need need{CheckedFor(key), {}};
  for (size_t i = 0; i < kChecked; ++i)
    need.amount[i] = group.pod.Get(need.resource[i]) * pods;
  return need;
}

// What replicas [begin, end) of the request need at least.
Need NeedOf(const GangRequest& request, size_t begin, size_t end,
            ResourceId key) {
  Need need{CheckedFor(key), {}};
  for (size_t r = begin; r < end; ++r) {
    const Need pods = NeedOfPods(request.groups[request.replicas[r].group],
                                 request.replicas[r].pods, key);
    for (size_t i = 0; i < kChecked; ++i) need.amount[i] += pods.amount[i];
  }
  return need;
}

// The domains a search tried at the level it had to keep to, and why each
// failed, for the pending message (docs/SCHEDULING.md, "Topologies").
class Tried {
 public:
  static constexpr int kShown = 4;
  void Add(absl::string_view label, absl::string_view path,
           absl::string_view why) {
    if (++count_ > kShown) return;
    absl::StrAppend(&text_, text_.empty() ? "" : "; ", label, " ",
                    ShowPath(path), ": ", why);
  }
  // Domain `d` lacks `need`'s resource `lack`. `in_all`: its room is what
  // it has in all (usage ignored: can the gang ever fit?), not free.
  void AddShort(absl::string_view label, const DomainRoom& d, const Need& need,
                int lack, const ResourceTable& resources, bool in_all) {
    if (count_ >= kShown) {
      ++count_;
      return;
    }
    const size_t i = static_cast<size_t>(lack);
    const std::string& name = resources.Name(need.resource[i]);
    Add(label, d.path,
        absl::StrCat(
            FormatQuantity(std::max<int64_t>(d.room[i], 0), ScaleFor(name)),
            " of ", FormatQuantity(need.amount[i], ScaleFor(name)), " ", name,
            in_all ? " in all" : " free"));
  }
  bool empty() const { return count_ == 0; }
  std::string Text() const {
    if (count_ <= kShown) return text_;
    return absl::StrCat(text_, "; and ", count_ - kShown, " more");
  }

 private:
  int count_ = 0;
  std::string text_;
};

// A search of a topology's levels (docs/SCHEDULING.md, "Topologies"), the
// gang's or a group's: from `preferred` up to `required` (0 when there is
// none), each level's domains within `within(level)` in the order to try
// them; a domain whose sums cannot hold `need` is passed over (and said, at
// the required level: below it, it is dropped unsaid), each other one given
// to `attempt(level, path)` until one places. `out` holds a failed
// attempt's words.
struct LevelSearch {
  const TopologyConstraint& c;
  int32_t required;
  int32_t preferred;
  const Need& need;
  bool spread;
  const ResourceTable& resources;
  bool in_all;       // the room is what domains have in all (usage ignored)
  Tried tried;       // at the required level
  bool any = false;  // a domain of the required level was seen

  // `walk_of(level, drop)`: the level's domains (a DomainWalk), less
  // those that cannot hold `drop` when it is not null.
  template <typename WalkOf, typename WithinOf, typename Attempt>
  bool Run(WalkOf walk_of, WithinOf within_of, Attempt attempt,
           const GangPlacement& out) {
    for (int32_t level = preferred; level >= std::max(required, 0); --level) {
      DomainWalk order = walk_of(level, level != required ? &need : nullptr);
      const absl::string_view within = within_of(level);
      const absl::string_view label = c.levels[static_cast<size_t>(level)];
      while (const DomainRoom* d = order.Next()) {
        if (!PathWithin(d->path, within)) continue;
        if (level == required) any = true;
        if (const int lack = Lacking(*d, need); lack >= 0) {
          if (level == required)
            tried.AddShort(label, *d, need, lack, resources, in_all);
          continue;
        }
        if (attempt(level, d->path)) return true;
        if (level == required) tried.Add(label, d->path, out.message);
      }
    }
    return false;
  }

  // Why nothing placed, with a required level: for "the gang" or "the
  // group", `bound` when it runs in a domain of that level already.
  std::string Failure(absl::string_view what, bool bound) const {
    const absl::string_view label = c.levels[static_cast<size_t>(required)];
    if (any) {
      return absl::StrCat("no ", label, " domain fits the ", what, "; tried ",
                          tried.Text());
    }
    return absl::StrCat(
        "no node has the topology label ", label,
        bound ? absl::StrCat(" in the ", what, "'s domain") : std::string());
  }
};

// The constraint a placement spec resolves to with no config topologies:
// its topology_key alone (requests built by hand; the Scheduler resolves
// its own).
const TopologyConstraint& ConstraintOf(
    const TopologyConstraint& resolved, const PlacementSpec& spec,
    std::forward_list<TopologyConstraint>& store) {
  if (!resolved.empty() || spec.topology_key.empty()) return resolved;
  return store.emplace_front(ResolveTopology(spec, {}));
}

// One attempt of a whole request inside an optional topology domain of the
// gang's topology, filling the domains of `fill` (a finer level of it, -1:
// none) most free first.
class Attempt {
 public:
  Attempt(const NodeTable& nodes, const ResourceTable& resources,
          const GangRequest& request, const PlacerOptions& options,
          const TopologyConstraint& gang_topology,
          std::optional<DomainFilter> domain, int32_t fill)
      : nodes_(nodes),
        resources_(resources),
        request_(request),
        options_(options),
        gang_topology_(gang_topology),
        domain_(std::move(domain)),
        gang_fill_(fill) {
    group_nodes_.resize(request.groups.size());
    group_domain_.resize(request.groups.size());
    segment_domain_.resize(request.groups.size());
    fills_.resize(request.groups.size());
    fill_now_.resize(request.groups.size());
    filters_.resize(request.groups.size());
    topologies_.resize(request.groups.size());
    for (size_t g = 0; g < request.groups.size(); ++g) {
      const PlacementGroup& group = request.groups[g];
      GroupFilter& f = filters_[g];
      f.filter = group.filter;
      if (f.filter.affinity != nullptr)
        f.max_preferred = MaxPreferred(*f.filter.affinity);
      f.cost = CostOf(f.filter);
      topologies_[g] =
          &ConstraintOf(group.topology, group.placement, legacy_topologies_);
    }
    for (size_t g = 0; g < request.groups.size(); ++g) {
      for (NodeId n : request.groups[g].bound_nodes) {
        ++group_nodes_[g][n.value()];
      }
    }
    // Freed room reads as a negative booking: every free amount adds it.
    if (options.freed != nullptr) {
      extra_.Reserve(options.freed->size());
      booked_pods_.Reserve(options.freed->size());
      for (const FreedRoom& f : *options.freed) {
        extra_[f.node.value()] -= f.resources;
        booked_pods_[f.node.value()] -= f.pods;
        if (!f.devices.empty()) {
          DeviceDelta& d = devices_[f.node.value()];
          if (d.size() < f.devices.size()) d.resize(f.devices.size(), 0);
          for (size_t i = 0; i < f.devices.size(); ++i) d[i] -= f.devices[i];
        }
      }
    }
  }

  bool Run(GangPlacement* out) {
    // Pods left per group in this request: STRICT_PACK needs room for all.
    left_.assign(request_.groups.size(), 0);
    for (const auto& replica : request_.replicas)
      left_[replica.group] += replica.pods;
    total_pods_ = 0;
    for (int64_t n : left_) total_pods_ += n;
    placed_pods_ = 0;
    out->nodes.clear();
    out->devices.clear();
    // Scale hints ask for up to max_count replicas, most of which may not
    // fit: reserve what a gang usually needs, not all of that.
    out->nodes.reserve(static_cast<size_t>(std::min<int64_t>(total_pods_, 64)));
    out->replicas = 0;
    if (gang_fill_ >= 0) {
      ResourceId key = kCpu;
      for (const auto& group : request_.groups) {
        if (KeyResource(group.pod) != kCpu) key = kGpu;
      }
      gang_fill_domains_ =
          FillOf(gang_topology_.levels, gang_fill_, key,
                 Within(gang_topology_.levels, gang_fill_, kNoGroup));
    }
    // Replicas of one group are contiguous in a request; a group with a
    // topology places its run inside one domain at a time.
    for (size_t begin = 0; begin < request_.replicas.size();) {
      size_t end = begin;
      while (end < request_.replicas.size() &&
             request_.replicas[end].group == request_.replicas[begin].group) {
        ++end;
      }
      if (!PlaceGroupRun(begin, end, out)) return false;
      begin = end;
    }
    return true;
  }

 private:
  static constexpr uint32_t kNoGroup = std::numeric_limits<uint32_t>::max();

  // What an attempt booked, to roll back a domain that failed.
  struct Snapshot {
    SmallIdMap<ResourceVector> extra;
    SmallIdMap<DeviceDelta> devices;
    SmallIdMap<int64_t> booked_pods;
    SmallIdMap<int> group_nodes;
    absl::InlinedVector<int64_t, 4> left;
    int64_t placed;
    size_t pods;
    int32_t replicas;
  };
  Snapshot Take(uint32_t g, const GangPlacement& out) const {
    return {extra_, devices_,     booked_pods_,     group_nodes_[g],
            left_,  placed_pods_, out.nodes.size(), out.replicas};
  }
  void Restore(const Snapshot& s, uint32_t g, GangPlacement* out) {
    ++scores_epoch_;  // the bookings are rolled back
    extra_ = s.extra;
    devices_ = s.devices;
    booked_pods_ = s.booked_pods;
    group_nodes_[g] = s.group_nodes;
    left_ = s.left;
    placed_pods_ = s.placed;
    out->nodes.resize(s.pods);
    out->devices.resize(s.pods);
    out->replicas = s.replicas;
  }

  // The path of the domain the gang (and group `g`, unless kNoGroup) keeps
  // to now, when it is a domain of `levels`' topology no finer than
  // `level`: the finer of the two; empty when none is.
  absl::string_view Within(const std::vector<std::string>& levels,
                           int32_t level, uint32_t g) const {
    absl::string_view within;
    auto consider = [&](const std::optional<DomainFilter>& d) {
      if (!d || d->level > level) return;
      if (!std::equal(levels.begin(), levels.begin() + d->level + 1,
                      d->levels->begin(), d->levels->begin() + d->level + 1))
        return;
      if (d->path.size() > within.size()) within = d->path;
    };
    consider(domain_);
    if (g != kNoGroup) consider(group_domain_[g]);
    return within;
  }

  // The nodes of the smallest topology domain group g keeps to now, when
  // it is small enough (a sixteenth of the nodes or less) that scanning it
  // beats walking the index over every node; null otherwise.
  const std::vector<uint32_t>* SmallDomain(uint32_t g) const {
    if (options_.topology == nullptr) return nullptr;
    const std::vector<uint32_t>* smallest = nullptr;
    for (const std::optional<DomainFilter>* d :
         {&domain_, &group_domain_[g], &segment_domain_[g], &fill_now_[g]}) {
      if (!*d || (*d)->key_id == TopologyIndex::kNoDomain) continue;
      const std::vector<uint32_t>* members =
          options_.topology->Members((*d)->key_id, (*d)->domain_id);
      if (members == nullptr) continue;  // not a configured level's key
      if (smallest == nullptr || members->size() < smallest->size())
        smallest = members;
    }
    if (smallest != nullptr && smallest->size() * 16 > nodes_.size())
      return nullptr;
    return smallest;
  }

  // The domains of `level` within `within`, most free `key` first: where
  // pods that do not fit in one of them go, so that they take as few as
  // can be (docs/SCHEDULING.md, "Topologies").
  struct Fill {
    // No initializers: kept in optionals (see KeptScores).
    const std::vector<std::string>* levels;
    int32_t level;
    DomainRooms domains;
    size_t next;
  };
  Fill FillOf(const std::vector<std::string>& levels, int32_t level,
              ResourceId key, absl::string_view within) {
    Fill fill;
    fill.levels = &levels;
    fill.level = level;
    fill.next = 0;
    for (const DomainRoom& d : DomainsAt(
             nodes_, options_, levels, level, CheckedFor(key),
             /*reserved=*/true, extra_, /*freed_in_booked=*/true, paths_)) {
      if (PathWithin(d.path, within)) fill.domains.push_back(d);
    }
    OrderDomains(fill.domains, /*spread=*/true);
    return fill;
  }
  void StartFill(uint32_t g, Fill fill) {
    fills_[g] = std::move(fill);
    fill_now_[g].reset();
    AdvanceFill(g);
  }
  void StopFill(uint32_t g) {
    fills_[g].reset();
    fill_now_[g].reset();
  }
  // On to the next domain to fill, then to anywhere the other rules allow;
  // false once there.
  bool AdvanceFill(uint32_t g) {
    std::optional<Fill>& fill = fills_[g];
    if (fill && fill->next < fill->domains.size()) {
      fill_now_[g] = MakeFilter(options_.topology, *fill->levels, fill->level,
                                fill->domains[fill->next++].path);
      ++scores_epoch_;
      return true;
    }
    fill.reset();
    if (!fill_now_[g]) return false;
    fill_now_[g].reset();
    ++scores_epoch_;
    return true;
  }

  // A run of group g's replicas: in one domain of its required level, in
  // as few of its preferred level as can be (docs/SCHEDULING.md,
  // "Topologies"), trying the preferred level's domains first, then each
  // coarser one's up to the required level.
  bool PlaceGroupRun(size_t begin, size_t end, GangPlacement* out) {
    const uint32_t g = request_.replicas[begin].group;
    const PlacementGroup& group = request_.groups[g];
    const TopologyConstraint& c = *topologies_[g];
    if (!c.unknown.empty()) {
      out->message = absl::StrCat("group ", group.name, ": ", c.unknown);
      return false;
    }
    const bool segments = c.segment >= 0 && c.segment_size > 0;
    if (c.required < 0 && c.preferred < 0) {
      if (gang_fill_domains_ && !segments) StartFill(g, *gang_fill_domains_);
      return PlaceSegments(begin, end, out);
    }
    const int32_t required = c.required;
    const int32_t preferred = c.preferred >= 0 ? c.preferred : required;
    absl::string_view bound;
    if (required >= 0) {
      for (NodeId n : group.bound_nodes) {
        std::string path = PathOf(nodes_[n.value()], c.levels, required);
        if (path.empty()) continue;
        bound = paths_.emplace_front(std::move(path));
        break;
      }
    }
    const ResourceId key = KeyResource(group.pod);
    const Need need = NeedOf(request_, begin, end, key);
    const Snapshot snapshot = Take(g, *out);
    LevelSearch search{c,
                       required,
                       preferred,
                       need,
                       RulesOf(group.placement.strategy).spread,
                       resources_,
                       options_.ignore_usage};
    const bool placed = search.Run(
        [&](int32_t level, const Need* drop) {
          return DomainWalk(
              DomainsAt(nodes_, options_, c.levels, level, CheckedFor(key),
                        /*reserved=*/true, extra_,
                        /*freed_in_booked=*/true, paths_),
              search.spread, drop);
        },
        [&](int32_t level) {
          return bound.empty() ? Within(c.levels, level, kNoGroup) : bound;
        },
        [&](int32_t level, absl::string_view path) {
          group_domain_[g] =
              MakeFilter(options_.topology, c.levels, level, path);
          ++scores_epoch_;
          if (level < preferred && !segments) {
            StartFill(g, FillOf(c.levels, preferred, key, path));
          } else {
            StopFill(g);
          }
          if (PlaceSegments(begin, end, out)) return true;
          Restore(snapshot, g, out);
          return false;
        },
        *out);
    if (placed) return true;
    group_domain_[g].reset();
    StopFill(g);
    ++scores_epoch_;
    if (required < 0) {
      if (!segments) {
        StartFill(g, FillOf(c.levels, preferred, key,
                            Within(c.levels, preferred, kNoGroup)));
      }
      return PlaceSegments(begin, end, out);
    }
    out->message = absl::StrCat("group ", group.name, ": ",
                                search.Failure("group", !bound.empty()));
    return false;
  }

  // Replicas [begin, end) of one group, segment after segment when it has
  // segments: each in one domain of the segment level, the fullest that
  // fits first (or the one its bound pods are in).
  bool PlaceSegments(size_t begin, size_t end, GangPlacement* out) {
    const TopologyConstraint& c = *topologies_[request_.replicas[begin].group];
    if (c.segment < 0 || c.segment_size <= 0)
      return PlaceReplicas(begin, end, out);
    for (size_t s = begin; s < end;) {
      size_t e = s;
      while (e < end &&
             request_.replicas[e].segment == request_.replicas[s].segment) {
        ++e;
      }
      if (!PlaceSegment(s, e, out)) return false;
      s = e;
    }
    return true;
  }

  bool PlaceSegment(size_t begin, size_t end, GangPlacement* out) {
    const uint32_t g = request_.replicas[begin].group;
    const PlacementGroup& group = request_.groups[g];
    const TopologyConstraint& c = *topologies_[g];
    const int32_t segment = request_.replicas[begin].segment;
    absl::string_view within = Within(c.levels, c.segment, g);
    bool bound = false;
    for (const auto& [s, node] : group.segment_nodes) {
      if (s != segment) continue;
      std::string path = PathOf(nodes_[node.value()], c.levels, c.segment);
      if (!path.empty()) within = paths_.emplace_front(std::move(path));
      bound = true;
      break;
    }
    const ResourceId key = KeyResource(group.pod);
    const Need need = NeedOf(request_, begin, end, key);
    // What the whole segment needs, every pod up to the group's max: a
    // new segment starts where all of it fits, if any domain has room for
    // it (growth places a segment a replica at a time); the minimum's pods
    // then take a domain that holds them.
    Need whole = need;
    if (!bound) {
      int64_t pods = 0;
      for (size_t r = begin; r < end; ++r) pods += request_.replicas[r].pods;
      pods = std::max(pods,
                      std::min<int64_t>(c.segment_size,
                                        std::max<int64_t>(group.max_pods, 0) -
                                            int64_t{segment} * c.segment_size));
      whole = NeedOfPods(group, pods, key);
    }
    DomainRooms domains =
        DomainsAt(nodes_, options_, c.levels, c.segment, CheckedFor(key),
                  /*reserved=*/true, extra_, /*freed_in_booked=*/true, paths_);
    OrderDomains(domains, RulesOf(group.placement.strategy).spread);
    const absl::string_view label = c.levels[static_cast<size_t>(c.segment)];
    const Snapshot snapshot = Take(g, *out);
    Tried tried;
    const int passes = whole.amount != need.amount && !request_.growth ? 2 : 1;
    for (int pass = 0; pass < passes; ++pass) {
      const Need& asks = pass == 0 ? whole : need;
      for (const DomainRoom& d : domains) {
        if (!PathWithin(d.path, within)) continue;
        if (pass == 1 && Lacking(d, whole) < 0) continue;  // tried already
        if (const int lack = Lacking(d, asks); lack >= 0) {
          if (pass + 1 == passes)
            tried.AddShort(label, d, asks, lack, resources_,
                           options_.ignore_usage);
          continue;
        }
        segment_domain_[g] =
            MakeFilter(options_.topology, c.levels, c.segment, d.path);
        ++scores_epoch_;
        const bool placed = PlaceReplicas(begin, end, out);
        if (!placed) tried.Add(label, d.path, out->message);
        segment_domain_[g].reset();
        ++scores_epoch_;
        if (placed) return true;
        Restore(snapshot, g, out);
      }
    }
    int64_t pods = 0;
    for (size_t r = begin; r < end; ++r) pods += request_.replicas[r].pods;
    out->message = absl::StrCat(
        "group ", group.name, ": segment ", segment, " (", pods,
        " pods) fits in no ", label, " domain",
        tried.empty() ? absl::StrCat(" (no node has the label",
                                     within.empty() ? "" : " there", ")")
                      : absl::StrCat("; tried ", tried.Text()));
    return false;
  }

  // Replicas [begin, end) are all of one group.
  bool PlaceReplicas(size_t begin, size_t end, GangPlacement* out) {
    std::optional<NodeId> last;
    for (size_t r = begin; r < end; ++r) {
      const PlacementReplica& replica = request_.replicas[r];
      const PlacementGroup& group = request_.groups[replica.group];
      const size_t replica_begin = out->nodes.size();
      for (int32_t p = 0; p < replica.pods; ++p) {
        // Fullest first (BINPACK): booking a pod only makes its node
        // fuller, so while the node picked for the group's previous pod
        // still takes the next one, it is still the best node and the
        // search is skipped.
        std::optional<NodeId> node;
        const Node* previous = last ? &nodes_[last->value()] : nullptr;
        if (previous && RulesOf(group.placement.strategy).fullest_first &&
            !Check(last->value(), *previous, FreeOn(last->value(), *previous),
                   replica.group, left_[replica.group])) {
          node = last;
        } else {
          node = PickNode(replica.group, left_[replica.group]);
        }
        // The domain being filled is full: the next one, then anywhere.
        while (!node && AdvanceFill(replica.group))
          node = PickNode(replica.group, left_[replica.group]);
        if (!node) {
          out->message = absl::StrCat(
              "placed ", placed_pods_, " of ", total_pods_,
              " pods, then no node fits the next pod of group ", group.name);
          if (options_.reasons) {
            absl::StrAppend(&out->message, " (", DescribeRejections(), ")");
            out->rejections = RejectionCounts();
            out->filtered =
                counted_ ? counted_filtered_
                         : std::any_of(rejections_.begin(), rejections_.end(),
                                       [](const auto& r) {
                                         return FilterReason(r.first.reason);
                                       });
          }
          out->nodes.resize(replica_begin);  // all of a replica or none
          out->devices.resize(replica_begin);
          return false;
        }
        out->devices.push_back(BookDevices(node->value(), group));
        extra_[node->value()] += group.pod;
        extra_[node->value()].Add(
            kGpu, nodes_[node->value()].MemoryShareOf(group.pod));
        ++booked_pods_[node->value()];
        if (!kept_scores_.empty()) booking_log_.push_back(node->value());
        ++group_nodes_[replica.group][node->value()];
        --left_[replica.group];
        ++placed_pods_;
        out->nodes.push_back(*node);
        last = node;
      }
      ++out->replicas;
    }
    return true;
  }

  // What a node has free: allocatable, less usage and reservations (unless
  // the options ignore them), less what this attempt booked on it. Read
  // resource by resource, so that checking and scoring the nodes a pick
  // walks builds no vectors; a view left empty reads as zero.
  struct Free {
    ResourceVector::View allocatable, used, reserved, booked;
    int64_t pods = 0;  // more pods the node may hold (its pod capacity)
    // The device shares of pods asking GPU memory, which take GPU room
    // without being in used or reserved nvidia.com/gpu (docs/SCHEDULING.md,
    // "GPU memory"; an attempt books them, and victims free them, as GPUs).
    int64_t memory_shares = 0;
    int64_t Of(ResourceId r) const {
      return allocatable.Get(r) - used.Get(r) - reserved.Get(r) -
             booked.Get(r) - (r == kGpu ? memory_shares : 0);
    }
  };
  Free FreeOn(uint32_t id, const Node& node) const {
    Free free;
    free.allocatable = node.allocatable.view();
    free.pods = node.max_pods;
    if (!options_.ignore_usage) {
      free.used = node.used.view();
      free.pods -= node.pods_used;
      free.memory_shares = node.devices.memory_held;
      if (!options_.ignore_reserved) {
        free.reserved = node.reserved.view();
        free.pods -= node.reserved_pods;
        free.memory_shares += node.devices.memory_reserved;
      }
    }
    if (const ResourceVector* booked = extra_.Find(id)) {
      free.booked = booked->view();
      free.pods -= *booked_pods_.Find(id);
    }
    return free;
  }

  // How many pods of `pod` fit into `free`, at most `cap`.
  static int64_t PodsThatFit(const Free& free, const ResourceVector& pod,
                             int64_t cap) {
    int64_t n = std::min(cap, free.pods);
    for (size_t i = 0; i < pod.size(); ++i) {
      ResourceId r(static_cast<uint32_t>(i));
      if (pod.Get(r) > 0) n = std::min(n, free.Of(r) / pod.Get(r));
    }
    return std::max<int64_t>(n, 0);
  }

  // The text of a taint or affinity reason (before Reject turns it into
  // a detail).
  std::string DetailText(const Rejection& why) const {
    const PlacementGroup& group = request_.groups[why.group];
    return why.reason == kTaint
               ? absl::StrCat("with taint ", TaintText(*why.taint),
                              " that group ", group.name, " does not tolerate")
               : absl::StrCat(
                     "outside the node affinity of group ", group.name, " (",
                     AffinityText(group.filter.affinity->required), ")");
  }

  // A reason's text in the message (a taint or affinity one before Reject
  // turns it into a detail).
  std::string TextOf(const Rejection& why) const {
    if (why.reason == kTaint || why.reason == kAffinity) return DetailText(why);
    std::string text = why.reason;
    if (why.reason == kInsufficient) text += resources_.Name(why.resource);
    return text;
  }

  static bool FilterReason(const char* reason) {
    return reason == kTaint || reason == kAffinity || reason == kSelector;
  }

  void Reject(Rejection why) {
    if (why.reason == kOutside) return;
    if (why.reason == kTaint || why.reason == kAffinity) {
      // The same taint (by value) or affinity of the same group on many
      // nodes is one reason, its text written once.
      auto same = [&](const Detail& d) {
        return d.reason == why.reason && d.group == why.group &&
               (why.reason == kAffinity || *d.taint == *why.taint);
      };
      auto it = std::find_if(details_.begin(), details_.end(), same);
      if (it == details_.end()) {
        it = details_.insert(
            it, {why.reason, why.group, why.taint, DetailText(why)});
      }
      why.detail = static_cast<uint32_t>(it - details_.begin()) + 1;
      why.taint = nullptr;
      why.group = 0;
    }
    for (auto& [seen, count] : rejections_) {
      if (seen == why) {
        ++count;
        return;
      }
    }
    rejections_.emplace_back(why, 1);
  }

  // (reason, nodes), by reason.
  std::vector<std::pair<std::string, int32_t>> RejectionCounts() const {
    if (counted_) return *counted_;
    std::map<std::string, int32_t> by_text;
    for (const auto& [why, count] : rejections_) {
      by_text[why.detail > 0 ? details_[why.detail - 1].text : TextOf(why)] +=
          count;
    }
    return {by_text.begin(), by_text.end()};
  }

  std::string DescribeRejections() const {
    std::vector<std::string> parts;
    for (const auto& [reason, count] : RejectionCounts()) {
      parts.push_back(absl::StrCat(count, " ", reason));
    }
    if (parts.empty()) return "no nodes";
    return absl::StrJoin(parts, ", ");
  }

  bool InDomain(const Node& node, uint32_t id,
                const DomainFilter& domain) const {
    if (domain.key_id != TopologyIndex::kNoDomain) {
      return options_.topology->DomainOf(domain.key_id, id) == domain.domain_id;
    }
    if (domain.level == 0)
      return node.Label((*domain.levels)[0]) == domain.path;
    return NodeInPath(node, *domain.levels, domain.level, domain.path);
  }

  // Reason the node cannot take a pod of `group`, or empty when it can.
  // `free`: FreeOn(node), which the caller needs too.
  // `verdict`, when given, gets the node's filter verdict (for the score).
  std::optional<Rejection> Check(uint32_t id, const Node& node,
                                 const Free& free, uint32_t group_index,
                                 int64_t pods_left,
                                 FilterVerdict* verdict = nullptr) const {
    const PlacementGroup& group = request_.groups[group_index];
    auto why = [](const char* reason) { return Rejection{reason, {}}; };
    // Outside the domains the pod keeps to now: not counted (the reasons
    // are those of the domain's nodes), and first, so that a placement kept
    // to a domain counts alike whether it scans the domain or every node.
    if (domain_ && !InDomain(node, id, *domain_)) return why(kOutside);
    if (const auto& in_group = group_domain_[group_index];
        in_group && !InDomain(node, id, *in_group)) {
      return why(kOutside);
    }
    if (const auto& in_segment = segment_domain_[group_index];
        in_segment && !InDomain(node, id, *in_segment)) {
      return why(kOutside);
    }
    if (const auto& filling = fill_now_[group_index];
        filling && !InDomain(node, id, *filling)) {
      return why(kOutside);
    }
    if (!node.schedulable && !options_.ignore_usage) return why("cordoned");
    // Taints, selector and affinity are the node's spec, like its labels: a
    // gang they keep off every node never fits (docs/SCHEDULING.md, "Node
    // filters").
    const FilterVerdict filtered = Verdict(node, id, group_index);
    if (verdict != nullptr) *verdict = filtered;
    switch (filtered.kind) {
      case FilterVerdict::kFits:
        break;
      case FilterVerdict::kTaint:
        return Rejection{kTaint, {}, filtered.taint, group_index};
      case FilterVerdict::kSelector:
        return why(kSelector);
      case FilterVerdict::kAffinity:
        return Rejection{kAffinity, {}, nullptr, group_index};
    }
    if (options_.avoid != nullptr &&
        std::find(options_.avoid->begin(), options_.avoid->end(), NodeId(id)) !=
            options_.avoid->end()) {
      return why("left by moved pods");
    }
    const auto& used_by_group = group_nodes_[group_index];
    const StrategyRules& rules = RulesOf(group.placement.strategy);
    const bool on_node = used_by_group.Contains(id);
    const bool placed = !used_by_group.empty();
    if (const char* refused = rules.Refuse(on_node, placed))
      return why(refused);
    const int64_t pods = rules.PodsNeeded(placed, pods_left);
    if (pods > free.pods) return why("at its pod capacity");
    // GPU memory (docs/SCHEDULING.md, "GPU memory"): said before the
    // amounts, as a node that does not report it has none of it either.
    const int64_t gpu = node.GpuOf(group.pod);
    if (gpu == kNoDeviceShare) return why(kSmallDevices);
    // A GPU memory share takes GPU room: what room held for a PIPELINED
    // gang keeps is not given to it (its devices may be the ones victims
    // free).
    if (AsksGpuMemory(group.pod) && gpu * pods > free.Of(kGpu))
      return why(kNoDevice);
    const ResourceVector::View pod = group.pod.view();
    for (size_t r = 0; r < pod.size(); ++r) {
      ResourceId rid(static_cast<uint32_t>(r));
      if (pod.Get(rid) * pods > free.Of(rid))
        return Rejection{kInsufficient, rid};
    }
    if (gpu > 0) {
      if (node.DeviceCount() > 0) {
        if (!Devices(id, node, group)) return why(kNoDevice);
      } else if (SharesGpu(group.pod)) {
        return why(kNotShared);
      }
    }
    return std::nullopt;
  }

  // What device d of `node` holds as this attempt sees it: the node's
  // devices (unless usage is ignored), less what victims free, plus what
  // the attempt booked.
  int64_t HeldOn(const Node& node, const DeviceDelta* delta, int d) const {
    int64_t h = options_.ignore_usage ? 0 : node.devices.Held(d);
    if (delta != nullptr && d < static_cast<int>(delta->size()))
      h += (*delta)[static_cast<size_t>(d)];
    return h;
  }

  // The devices a pod of `group` would get on `node` (tracked devices).
  // Unless `choose`, a whole-GPU pod on a node this attempt has not booked
  // on is only counted: nullopt when it does not fit, else 0.
  std::optional<DeviceMask> Devices(uint32_t id, const Node& node,
                                    const PlacementGroup& group,
                                    bool choose = false) const {
    const DeviceDelta* delta = devices_.Find(id);
    const int32_t keep = options_.ignore_usage || options_.ignore_reserved
                             ? 0
                             : node.devices.Reserved();
    const int64_t gpu = node.GpuOf(group.pod);
    if (!choose && delta == nullptr && !options_.ignore_usage &&
        !IsGpuFraction(gpu)) {
      // Whole GPUs on a node this attempt has not touched: whether enough
      // devices are untouched is a count (which ones, only when booked).
      const int untouched = node.DeviceCount() - node.devices.touched;
      if (DevicesOf(gpu) > untouched - keep) return std::nullopt;
      return DeviceMask{0};
    }
    return ChooseDevices(
        node.DeviceCount(), [&](int d) { return HeldOn(node, delta, d); }, keep,
        gpu, RulesOf(group.placement.strategy).spread);
  }

  // Books the devices of one pod of `group` on `node` (which Check let
  // take it); 0 when the pod holds no devices there.
  DeviceMask BookDevices(uint32_t id, const PlacementGroup& group) {
    const Node& node = nodes_[id];
    const int64_t gpu = node.GpuOf(group.pod);
    if (gpu <= 0 || node.DeviceCount() == 0) return 0;
    const std::optional<DeviceMask> mask = Devices(id, node, group, true);
    if (!mask) return 0;  // Check said it fits; cannot happen
    DeviceDelta& delta = devices_[id];
    ForEachDevice(*mask, [&](int d) {
      if (static_cast<int>(delta.size()) <= d) delta.resize(d + 1, 0);
      delta[static_cast<size_t>(d)] += static_cast<int32_t>(PerDevice(gpu));
    });
    return *mask;
  }

  // The filter verdict of `node` (id `id`) for group `g`: worked out on
  // every call when that is cheap, else once per attempt.
  FilterVerdict Verdict(const Node& node, uint32_t id, uint32_t g) const {
    const GroupFilter& f = filters_[g];
    if (f.filter.empty() && node.taints.empty()) return {};
    if (f.cost.On(node.taints.size()) <= kRememberVerdictCost)
      return Judge(node, f.filter);
    // Sized only when some filter is costly: the usual attempt needs none.
    if (verdicts_.empty()) verdicts_.resize(request_.groups.size());
    if (const FilterVerdict* known = verdicts_[g].Find(id)) return *known;
    return verdicts_[g][id] = Judge(node, f.filter);
  }

  // Lexicographic score, smaller is better: a node with an untolerated
  // PreferNoSchedule taint last of all, then one matching less preferred
  // affinity weight (both in the first number), then by the group's
  // strategy.
  using Score = std::tuple<int64_t, int, int64_t, int, int64_t, int64_t,
                           int64_t, uint32_t>;
  // Where the node stands on filters alone: no node scores better there.
  bool BestFiltered(const Score& score, uint32_t g) const {
    return std::get<0>(score) == -filters_[g].max_preferred;
  }

  // The node's score for the next pod of the group, or nullopt (counted in
  // the rejections) when it cannot take it.
  std::optional<Score> ScoreNode(uint32_t i, uint32_t group_index,
                                 int64_t pods_left) {
    const Node& node = nodes_[i];
    if (!node.live) return std::nullopt;
    const Free free = FreeOn(i, node);
    FilterVerdict verdict;
    if (auto why = Check(i, node, free, group_index, pods_left, &verdict)) {
      Reject(*why);
      return std::nullopt;
    }
    const PlacementGroup& group = request_.groups[group_index];
    const ResourceId key = KeyResource(group.pod);
    const bool gpu_pod = key == kGpu;
    const StrategyRules& rules = RulesOf(group.placement.strategy);
    const bool spread = rules.spread;
    auto left_after = [&](ResourceId r) {
      return free.Of(r) - group.pod.Get(r);
    };
    int64_t key_left = left_after(key);
    int64_t mem_left = left_after(kMemory);
    // CPU-only pods keep off GPU nodes when they can. A fraction goes
    // where it shares a device first when packing, where it gets a device
    // of its own first when spreading (docs/SCHEDULING.md, "Fractional
    // GPUs").
    int gpu_tier = (!gpu_pod && node.allocatable.Get(kGpu) > 0) ? 1 : 0;
    if (SharesGpu(group.pod)) {
      const std::optional<DeviceMask> mask = Devices(i, node, group);
      const bool shares =
          mask && HeldOn(node, devices_.Find(i), std::countr_zero(*mask)) > 0;
      gpu_tier = shares == spread ? 1 : 0;
    }
    bool on_group_node = group_nodes_[group_index].Contains(i);
    int group_tier = rules.GroupTier(on_group_node);
    // PACK uses as few nodes as possible: a new node is chosen by how many
    // of the group's remaining pods it can hold (all of them first).
    int64_t holds = 0;
    if (rules.by_pods_held && !on_group_node) {
      holds = PodsThatFit(free, group.pod, pods_left);
    }
    // GPU pods: after the GPUs, the cpu a GPU node keeps for others.
    int64_t cpu_left = gpu_pod ? left_after(kCpu) : 0;
    // An avoided node is last whatever its preferred weight (at most 3,200).
    const int64_t filtered =
        (verdict.avoid ? int64_t{1} << 32 : 0) - verdict.preferred;
    return spread ? Score{filtered,  group_tier, 0,         gpu_tier,
                          -key_left, -cpu_left,  -mem_left, i}
                  : Score{filtered, group_tier, -holds,   gpu_tier,
                          key_left, cpu_left,   mem_left, i};
  }

  // BINPACK through the index: the nodes this attempt already booked on
  // (their free amount changed) are scored directly; of the others the
  // first that fits in index order is the best. Empty when it finds none
  // (the caller then scans for the full rejection counts, unless the
  // options ask for none).
  std::optional<NodeId> PickIndexed(uint32_t group_index, int64_t pods_left) {
    const PlacementGroup& group = request_.groups[group_index];
    std::optional<Score> best;
    // The walk stops at the first node that fits, unless the group would
    // rather avoid it (PreferNoSchedule) or prefers others (preferred
    // affinity): then it goes on for one that is best on those.
    auto consider = [&](uint32_t i) {
      std::optional<Score> score = ScoreNode(i, group_index, pods_left);
      if (score && (!best || *score < *best)) best = score;
      return score.has_value() && BestFiltered(*score, group_index);
    };
    if (extra_.size() < kKeptScoresFrom) {
      extra_.ForEach([&](uint32_t id, const ResourceVector&) { consider(id); });
    } else {
      best = BestBooked(group_index, pods_left);
    }
    auto untouched = [&](uint32_t i) {
      return !extra_.Contains(i) && consider(i);
    };
    if (SharesGpu(group.pod)) {
      // A fraction shares a device where one has room (docs/SCHEDULING.md,
      // "Fractional GPUs"): the first such node in index order, else the
      // first node that takes it at all.
      auto settled = [&] {
        return best && BestFiltered(*best, group_index) &&
               std::get<3>(*best) == 0;
      };
      // Walked even when a booked node shares: that node may have been
      // opened by another group's fraction and leave more GPUs than the
      // first unbooked node that shares, where the walk stops. The walk
      // goes in BINPACK's order among unbooked nodes (GPUs, cpu, memory
      // left, id: their keys less the pod), so once it is past a settled
      // best no later node can beat it, whether it fits or not.
      //
      // A node the walk finds unable to take the group's pod stays so for
      // the rest of the attempt (only this attempt's bookings change room,
      // a booked node is scored apart, and under BINPACK, the only strategy
      // that walks the index, no check reads the pods left or the group's
      // other nodes), and a booked node stays booked,
      // until a new domain or a rollback (scores_epoch_): the group's next
      // pick resumes after the first run of such nodes.
      if (shared_walks_.size() < request_.groups.size())
        shared_walks_.resize(request_.groups.size());
      std::optional<SharedWalk>& walk = shared_walks_[group_index];
      if (!walk || walk->epoch != scores_epoch_)
        walk = SharedWalk{scores_epoch_, NodeIndex::kFirst};
      bool skipped_all = true;  // every node visited so far is skipped again
      auto skip_next_time = [&](const NodeIndex::Key& key) {
        if (skipped_all) walk->from = NodeIndex::After(key);
        return false;
      };
      options_.index->VisitShared(walk->from, [&](const NodeIndex::Key& key) {
        const uint32_t i = std::get<3>(key);
        if (extra_.Contains(i)) return skip_next_time(key);
        if (settled() &&
            std::make_tuple(std::get<0>(key) - group.pod.Get(kGpu),
                            std::get<1>(key) - group.pod.Get(kCpu),
                            std::get<2>(key) - group.pod.Get(kMemory), i) >
                std::make_tuple(std::get<4>(*best), std::get<5>(*best),
                                std::get<6>(*best), std::get<7>(*best)))
          return true;
        std::optional<Score> score = ScoreNode(i, group_index, pods_left);
        if (!score) return skip_next_time(key);
        skipped_all = false;
        if (!best || *score < *best) best = score;
        return BestFiltered(*score, group_index) && std::get<3>(*score) == 0;
      });
      if (!settled()) {
        // GPU memory is a share only a node can say: any free GPU may do,
        // but a node with none has no device with room.
        const int64_t need = std::max<int64_t>(group.pod.Get(kGpu), 1);
        options_.index->VisitByGpu(need, group.pod.Get(kCpu), untouched);
      }
    } else if (group.pod.Get(kGpu) > 0) {
      options_.index->VisitByGpu(group.pod.Get(kGpu), group.pod.Get(kCpu),
                                 untouched);
    } else {
      options_.index->VisitByCpu(false, group.pod.Get(kCpu), untouched);
      // A GPU node only if no node without GPUs can take the pod (or only
      // one the group would rather avoid, or prefers less).
      if (!best || !BestFiltered(*best, group_index) ||
          std::get<3>(*best) == 1) {
        options_.index->VisitByCpu(true, group.pod.Get(kCpu), untouched);
      }
    }
    if (!best) return std::nullopt;
    return NodeId(std::get<7>(*best));
  }

  // The best score among the nodes in extra_ (booked by this attempt, or
  // given freed room) for the next pod of BINPACK group `g`. A trial of a
  // victim search gives the room of hundreds of nodes, and a gang of 8-GPU
  // pods fills a node with each pod, so scoring them all on every pick
  // made a trial cost pods x nodes. Under BINPACK a node's score is its
  // own: its free room and devices less this attempt's bookings there, its
  // filters, the group's domain (no group tier, pods held or pods needed
  // beyond one), so the scores are kept per group and only the nodes booked
  // since are scored again; a new domain or a rollback scores all again.
  std::optional<Score> BestBooked(uint32_t g, int64_t pods_left) {
    if (kept_scores_.size() < request_.groups.size())
      kept_scores_.resize(request_.groups.size());
    std::optional<KeptScores>& kept = kept_scores_[g];
    auto rescore = [&](uint32_t id) {
      if (auto it = kept->of.find(id); it != kept->of.end()) {
        kept->by_score.erase(it->second);
        kept->of.erase(it);
      }
      if (std::optional<Score> score = ScoreNode(id, g, pods_left)) {
        kept->by_score.insert(*score);
        kept->of.emplace(id, *score);
      }
    };
    if (!kept || kept->epoch != scores_epoch_) {
      kept.emplace();
      kept->epoch = scores_epoch_;
      kept->seen = booking_log_.size();
      kept->of.reserve(extra_.size());
      extra_.ForEach([&](uint32_t id, const ResourceVector&) { rescore(id); });
    } else {
      // Pods booked in a row on one node are scored there once.
      for (; kept->seen < booking_log_.size(); ++kept->seen) {
        const size_t i = kept->seen;
        if (i + 1 == booking_log_.size() ||
            booking_log_[i + 1] != booking_log_[i])
          rescore(booking_log_[i]);
      }
    }
    if (kept->by_score.empty()) return std::nullopt;
    return *kept->by_score.begin();
  }

  // Counts why each node turns the group's next pod away from the kept
  // reasons (core/kept_reasons.h) instead of walking every node, after the
  // index found no node for it: the nodes whose room changed since are
  // read again, and those this attempt booked on are read as they are now.
  // False, leaving it to the walk, where a node's reason is not its own
  // alone (domains, freed room, avoided nodes) or a node would take the
  // pod. Only BINPACK walks the index and so gets here: its rules read
  // neither the group's nodes nor the pods left (Refuse never refuses,
  // PodsNeeded is one), which the strict strategies' would; the check on
  // them stays for a strategy that walks the index some day.
  bool CountKept(uint32_t g) {
    if (options_.kept_reasons == nullptr || options_.kept_shape == nullptr ||
        options_.freed != nullptr || options_.avoid != nullptr ||
        options_.ignore_usage || options_.ignore_reserved || domain_ ||
        group_domain_[g] || segment_domain_[g]) {
      return false;
    }
    const PlacementGroup& group = request_.groups[g];
    const StrategyRules& rules = RulesOf(group.placement.strategy);
    if (rules.one_pod_per_node || rules.one_node) return false;
    KeptReasons::Shape* shape =
        &options_.kept_reasons->For(*options_.kept_shape);
    if (shape->groups.size() <= g) shape->groups.resize(g + 1);
    KeptReasons::Group& kept = shape->groups[g];
    auto booked = [&](uint32_t id) {
      return extra_.Contains(id) || devices_.Contains(id) ||
             booked_pods_.Contains(id);
    };
    // The text of each reason this count meets, built once (a count of
    // every node meets a handful of reasons on thousands of nodes).
    absl::InlinedVector<std::pair<Rejection, int32_t>, 8> ids;
    auto text_id = [&](const Rejection& why) {
      for (const auto& [seen, id] : ids) {
        if (seen.reason == why.reason && seen.resource == why.resource &&
            seen.group == why.group &&
            (seen.taint == why.taint ||
             (seen.taint != nullptr && why.taint != nullptr &&
              *seen.taint == *why.taint)))
          return id;
      }
      const int32_t id = shape->TextId(TextOf(why), FilterReason(why.reason));
      ids.emplace_back(why, id);
      return id;
    };
    auto reason = [&](uint32_t id) -> int32_t {
      const Node& node = nodes_[id];
      if (!node.live) return KeptReasons::kNotCounted;
      const std::optional<Rejection> why =
          Check(id, node, FreeOn(id, node), g, left_[g]);
      if (!why) return KeptReasons::kFits;
      if (why->reason == kOutside) return KeptReasons::kNotCounted;
      return text_id(*why);
    };
    // A group's texts name it: another name (same shape) counts again.
    if (!kept.counted || kept.of.size() != nodes_.size() ||
        kept.name != group.name) {
      kept = {};
      kept.counted = true;
      kept.name = group.name;
      kept.of.assign(nodes_.size(), KeptReasons::kNotCounted);
      for (uint32_t id = 0; id < nodes_.size(); ++id)
        kept.Set(id, booked(id) ? KeptReasons::kStale : reason(id));
    } else {
      std::vector<uint32_t> stale;
      stale.swap(kept.stale);
      for (uint32_t id : stale) {
        if (booked(id)) {
          kept.stale.push_back(id);  // still kStale
        } else {
          kept.Set(id, reason(id));
        }
      }
    }
    // Nodes the index did not give yet would take the pod: the walk says.
    if (kept.fits > 0) return false;
    std::vector<int32_t> count = kept.count;
    bool fits = false;
    auto recount = [&](uint32_t id) {
      const int32_t was = kept.of[id];
      if (was >= 0) --count[static_cast<size_t>(was)];
      const int32_t now = reason(id);
      if (now == KeptReasons::kFits) fits = true;
      if (now < 0) return;
      if (count.size() <= static_cast<size_t>(now)) count.resize(now + 1, 0);
      ++count[static_cast<size_t>(now)];
    };
    extra_.ForEach([&](uint32_t id, const ResourceVector&) { recount(id); });
    devices_.ForEach([&](uint32_t id, const DeviceDelta&) {
      if (!extra_.Contains(id)) recount(id);
    });
    booked_pods_.ForEach([&](uint32_t id, const int64_t&) {
      if (!extra_.Contains(id) && !devices_.Contains(id)) recount(id);
    });
    if (fits) return false;
    std::map<std::string, int32_t> by_text;
    counted_filtered_ = false;
    for (size_t t = 0; t < count.size(); ++t) {
      if (count[t] <= 0) continue;
      by_text[shape->texts[t]] += count[t];
      if (shape->filter[t]) counted_filtered_ = true;
    }
    counted_.emplace(by_text.begin(), by_text.end());
    return true;
  }

  std::optional<NodeId> PickNode(uint32_t group_index, int64_t pods_left) {
    const PlacementGroup& group = request_.groups[group_index];
    rejections_.clear();
    counted_.reset();
    // Selectors and topology domains are checked node by node (Check), so
    // the first node in index order that passes is still the best; they only
    // make the walk longer.
    // Freed room can give a node a device to share that its index entry
    // does not show (the walk of the shared ones would stop before it): a
    // fraction with freed room scans.
    bool indexable = options_.index != nullptr && !options_.ignore_usage &&
                     !options_.ignore_reserved &&
                     RulesOf(group.placement.strategy).fullest_first &&
                     !(options_.freed != nullptr && SharesGpu(group.pod));
    if (const std::vector<uint32_t>* members = SmallDomain(group_index)) {
      // Kept to a domain of few nodes (a rack): its nodes are scanned, as
      // the scan below would, rather than walked for in every node's order.
      std::optional<Score> best;
      for (uint32_t i : *members) {
        std::optional<Score> score = ScoreNode(i, group_index, pods_left);
        if (score && (!best || *score < *best)) best = score;
      }
      // The reasons are counted: no node outside the domain counts.
      if (!best) return std::nullopt;
      return NodeId(std::get<7>(*best));
    }
    if (indexable) {
      if (std::optional<NodeId> node = PickIndexed(group_index, pods_left))
        return node;
      rejections_.clear();
      // Every node that can take the pod is in the index or booked by this
      // attempt, so the scan below would only count the reasons (and a
      // domain being filled fills the next one first).
      if (!options_.reasons || fill_now_[group_index]) return std::nullopt;
      if (CountKept(group_index)) return std::nullopt;
    }
    std::optional<Score> best;
    for (uint32_t i = 0; i < nodes_.size(); ++i) {
      std::optional<Score> score = ScoreNode(i, group_index, pods_left);
      if (score && (!best || *score < *best)) best = score;
    }
    if (!best) return std::nullopt;
    return NodeId(std::get<7>(*best));
  }

  const NodeTable& nodes_;
  const ResourceTable& resources_;
  const GangRequest& request_;
  const PlacerOptions& options_;
  const TopologyConstraint& gang_topology_;
  std::optional<DomainFilter> domain_;
  const int32_t gang_fill_;
  // The gang's fill (gang_fill_ >= 0), each group's start.
  std::optional<Fill> gang_fill_domains_;
  // Per group: its topology constraint (its own, or legacy_topologies_'s).
  absl::InlinedVector<const TopologyConstraint*, 4> topologies_;
  std::forward_list<TopologyConstraint> legacy_topologies_;
  // Per group: the domains it fills, and the one it fills now.
  absl::InlinedVector<std::optional<Fill>, 4> fills_;
  absl::InlinedVector<std::optional<DomainFilter>, 4> fill_now_;
  // Per group: the domain of the segment being placed.
  absl::InlinedVector<std::optional<DomainFilter>, 4> segment_domain_;
  PathStore paths_;
  // Per attempt scratch, sized for a gang of a few groups on a few nodes so
  // that the usual attempt allocates nothing (SmallIdMap).
  SmallIdMap<ResourceVector> extra_;  // node id -> booked by this attempt
  SmallIdMap<DeviceDelta> devices_;   // node id -> booked per GPU device
  SmallIdMap<int64_t> booked_pods_;   // node id -> pods booked on it
  absl::InlinedVector<SmallIdMap<int>, 4> group_nodes_;  // per group
  // (reason, nodes) for the pod being placed: a handful of reasons.
  absl::InlinedVector<std::pair<Rejection, int32_t>, 8> rejections_;
  // The same by text, when CountKept counted them from kept reasons, and
  // whether any is a taint, selector or affinity.
  std::optional<std::vector<std::pair<std::string, int32_t>>> counted_;
  bool counted_filtered_ = false;
  // Taint and affinity reasons and their texts (Reject).
  struct Detail {
    const char* reason;
    uint32_t group;
    const Taint* taint;  // kTaint
    std::string text;
  };
  std::vector<Detail> details_;
  // Per group: its filters, and what the best node could score on them.
  struct GroupFilter {
    NodeFilter filter;
    int32_t max_preferred = 0;
    JudgeCost cost;
  };
  absl::InlinedVector<GroupFilter, 4> filters_;
  // Per group: node id -> verdict, for filters costly to work out.
  mutable absl::InlinedVector<SmallIdMap<FilterVerdict>, 4> verdicts_;
  absl::InlinedVector<int64_t, 4> left_;  // pods left per group
  int64_t total_pods_ = 0;
  int64_t placed_pods_ = 0;
  // Per group: the topology domain it is being placed in now, if any.
  absl::InlinedVector<std::optional<DomainFilter>, 4> group_domain_;
  // BestBooked: per group, the scores of the nodes in extra_ as of the
  // first `seen` bookings, while scores_epoch_ stays.
  static constexpr size_t kKeptScoresFrom = 16;
  struct KeptScores {
    // Set by BestBooked (no initializers here: clang cannot construct a
    // nested class with them from inside the enclosing class's body).
    uint64_t epoch;
    size_t seen;
    absl::btree_set<Score> by_score;  // a score ends in its node id
    absl::flat_hash_map<uint32_t, Score> of;
  };
  absl::InlinedVector<std::optional<KeptScores>, 4> kept_scores_;
  // PickIndexed: per group, where the walk of the nodes that share resumes,
  // while scores_epoch_ stays (no initializers: see KeptScores).
  struct SharedWalk {
    uint64_t epoch;
    NodeIndex::Key from;
  };
  absl::InlinedVector<std::optional<SharedWalk>, 4> shared_walks_;
  // The node of each pod booked, in order, from the first kept scores on
  // (what was booked before them is in them).
  std::vector<uint32_t> booking_log_;
  uint64_t scores_epoch_ = 0;
};

}  // namespace

ResourceVector TotalOf(const GangRequest& request) {
  ResourceVector total;
  // One AddScaled per run of one group's replicas (contiguous in the
  // usual request, though nothing here needs them to be).
  const auto& replicas = request.replicas;
  for (size_t i = 0; i < replicas.size();) {
    const uint32_t g = replicas[i].group;
    int64_t pods = 0;
    for (; i < replicas.size() && replicas[i].group == g; ++i)
      pods += replicas[i].pods;
    total.AddScaled(request.groups[g].pod, pods);
  }
  return total;
}

int32_t PodsOf(const GangRequest& request) {
  int32_t pods = 0;
  for (const auto& replica : request.replicas) pods += replica.pods;
  return pods;
}

bool PlacedByCount(const GangRequest& request) {
  if (request.replicas.empty() || !request.topology.empty() ||
      !request.gang.topology_key.empty()) {
    return false;
  }
  const PlacementGroup& first = request.groups[request.replicas[0].group];
  for (const PlacementReplica& replica : request.replicas) {
    const PlacementGroup& group = request.groups[replica.group];
    // Another group: alike only when neither filters any node.
    if (&group != &first && (group.pod != first.pod || !group.filter.empty() ||
                             !first.filter.empty())) {
      return false;
    }
    const StrategyRules& rules = RulesOf(group.placement.strategy);
    if (rules.one_node || rules.one_pod_per_node) return false;
    if (!group.topology.empty() || !group.placement.topology_key.empty())
      return false;
  }
  return !SharesGpu(first.pod);
}

int64_t PodsByCount(const Node& node, const PlacementGroup& group,
                    const FreedRoom* freed) {
  if (!node.live || !node.schedulable) return 0;
  if ((!group.filter.empty() || !node.taints.empty()) &&
      Judge(node, group.filter).kind != FilterVerdict::kFits) {
    return 0;
  }
  const ResourceVector& pod = group.pod;
  int64_t fit = PodsInRoom(
      pod, node.FreePods() + (freed != nullptr ? freed->pods : 0),
      [&](ResourceId r) {
        int64_t free = node.allocatable.Get(r) - node.used.Get(r) -
                       node.reserved.Get(r) +
                       (freed != nullptr ? freed->resources.Get(r) : 0);
        // What pods asking GPU memory hold and reserve is GPU room taken
        // (Attempt::Free::Of).
        if (r == kGpu)
          free -= node.devices.memory_held + node.devices.memory_reserved;
        return free;
      });
  // Whole GPUs take untouched devices, leaving those kept for
  // reservations (ChooseDevices).
  const int64_t gpu = pod.Get(kGpu);
  const int count = node.DeviceCount();
  if (gpu > 0 && count > 0 && fit > 0) {
    int untouched = count - node.devices.touched;
    if (freed != nullptr && !freed->devices.empty()) {
      untouched = 0;
      for (int d = 0; d < count; ++d) {
        const int64_t back =
            d < static_cast<int>(freed->devices.size()) ? freed->devices[d] : 0;
        untouched += node.devices.Held(d) - back == 0 ? 1 : 0;
      }
    }
    fit = std::min<int64_t>(
        fit, (untouched - node.devices.Reserved()) / DevicesOf(gpu));
  }
  return std::max<int64_t>(fit, 0);
}

GangPlacement TryPlaceGang(const NodeTable& nodes,
                           const ResourceTable& resources,
                           const GangRequest& request,
                           const PlacerOptions& options) {
  GangPlacement out;
  std::forward_list<TopologyConstraint> legacy;
  const TopologyConstraint& c =
      ConstraintOf(request.topology, request.gang, legacy);
  auto run = [&](std::optional<DomainFilter> domain, int32_t fill) {
    Attempt attempt(nodes, resources, request, options, c, std::move(domain),
                    fill);
    return attempt.Run(&out);
  };
  if (!c.unknown.empty()) {
    out.result = PlaceResult::kRetryLater;
    out.message = c.unknown;
    return out;
  }
  if (c.required < 0 && c.preferred < 0) {
    out.result =
        run(std::nullopt, -1) ? PlaceResult::kPlaced : PlaceResult::kRetryLater;
    return out;
  }
  // The preferred level's domains first, then each coarser level's up to
  // the required one (docs/SCHEDULING.md, "Topologies"); where the gang
  // runs already, within its domain of the required level.
  const int32_t required = c.required;
  const int32_t preferred = c.preferred >= 0 ? c.preferred : required;
  std::string bound;
  if (required >= 0) {
    for (NodeId n : request.gang_bound_nodes) {
      bound = PathOf(nodes[n.value()], c.levels, required);
      if (!bound.empty()) break;
    }
  }
  ResourceId key = kCpu;
  for (const auto& group : request.groups) {
    if (KeyResource(group.pod) != kCpu) key = kGpu;
  }
  const Need need = NeedOf(request, 0, request.replicas.size(), key);
  PathStore paths;
  LevelSearch search{c,
                     required,
                     preferred,
                     need,
                     RulesOf(request.gang.strategy).spread_gang_domains,
                     resources,
                     options.ignore_usage};
  // Capacity left after running work (room held for PIPELINED gangs is not
  // subtracted here); what victims free bounds what a domain takes.
  // The room a gang search reads is what DomainCache keeps (nothing
  // booked or freed, usage counted, reservations not taken off): its
  // BINPACK order, when it has one.
  const bool cached = options.domains != nullptr &&
                      options.topology != nullptr && options.freed == nullptr &&
                      !options.ignore_usage && !search.spread;
  if (search.Run(
          [&](int32_t level, const Need* drop) {
            if (cached) {
              if (std::optional<uint32_t> k =
                      LevelKeyId(options.topology, c.levels, level)) {
                if (const DomainCache::Order* order = options.domains->Get(
                        *options.topology, *k, CheckedFor(key),
                        options.room_version)) {
                  return DomainWalk(*order, options.topology->Domains(*k),
                                    drop);
                }
              }
            }
            return DomainWalk(
                DomainsAt(nodes, options, c.levels, level, CheckedFor(key),
                          /*reserved=*/false, {},
                          /*freed_in_booked=*/false, paths),
                search.spread, drop);
          },
          [&](int32_t) { return absl::string_view(bound); },
          [&](int32_t level, absl::string_view path) {
            // Inside a coarser domain, the preferred level's are filled.
            return run(MakeFilter(options.topology, c.levels, level, path),
                       level < preferred ? preferred : -1);
          },
          out)) {
    out.result = PlaceResult::kPlaced;
    return out;
  }
  out.result = PlaceResult::kRetryLater;
  if (required < 0) {
    if (run(std::nullopt, preferred)) out.result = PlaceResult::kPlaced;
    return out;
  }
  out.message = search.Failure("gang", !bound.empty());
  return out;
}

GangPlacement PlaceGang(const NodeTable& nodes, const ResourceTable& resources,
                        const GangRequest& request,
                        const PlacerOptions& options) {
  GangPlacement now = TryPlaceGang(nodes, resources, request, options);
  if (now.result == PlaceResult::kPlaced) return now;
  GangPlacement ever =
      TryPlaceGang(nodes, resources, request,
                   {.ignore_usage = true, .topology = options.topology});
  if (ever.result != PlaceResult::kPlaced) {
    ever.result = PlaceResult::kNeverFits;
    ever.nodes.clear();
    ever.devices.clear();
    ever.replicas = 0;
    return ever;
  }
  now.nodes.clear();
  now.devices.clear();
  now.replicas = 0;
  return now;
}

}  // namespace gangsched
