#include "core/workload.h"

namespace gangsched {

absl::string_view ToString(WorkloadState state) {
  switch (state) {
    case WorkloadState::kPending:
      return "PENDING";
    case WorkloadState::kPipelined:
      return "PIPELINED";
    case WorkloadState::kRunning:
      return "RUNNING";
    case WorkloadState::kReleasing:
      return "RELEASING";
    case WorkloadState::kReleased:
      return "RELEASED";
  }
  return "UNKNOWN";
}

absl::string_view ToString(PendingCode code) {
  switch (code) {
    case PendingCode::kNone:
      return "NONE";
    case PendingCode::kQueueQuota:
      return "QUEUE_QUOTA";
    case PendingCode::kQueueLimit:
      return "QUEUE_LIMIT";
    case PendingCode::kCapacity:
      return "CAPACITY";
    case PendingCode::kUnsatisfiable:
      return "UNSATISFIABLE";
    case PendingCode::kWaitingForEvictions:
      return "WAITING_FOR_EVICTIONS";
    case PendingCode::kOrder:
      return "ORDER";
  }
  return "UNKNOWN";
}

std::optional<PendingCode> PendingCodeNamed(absl::string_view name) {
  for (PendingCode code : kPendingCodes) {
    if (ToString(code) == name) return code;
  }
  return std::nullopt;
}

void GroupState::ResizeSlots(size_t slots) {
  slot_node.resize(slots);
  slot_evicting.resize(slots, 0);
  slot_nominated.resize(slots);
  slot_pos.resize(slots, 0);
  if (!slot_devices.empty()) slot_devices.resize(slots, 0);
}

int32_t GroupState::LiveReplicas() const {
  int32_t n = 0;
  for (uint8_t live : replica_live) n += live;
  return n;
}

bool GroupState::ReplicaBound(int32_t replica) const {
  for (int32_t p = 0; p < pods_per_replica; ++p) {
    if (!slot_node[replica * pods_per_replica + p].valid()) return false;
  }
  return true;
}

bool GroupState::ReplicaAnyBound(int32_t replica) const {
  for (int32_t p = 0; p < pods_per_replica; ++p) {
    if (slot_node[replica * pods_per_replica + p].valid()) return true;
  }
  return false;
}

int32_t GroupState::BoundReplicas() const {
  int32_t n = 0;
  for (int32_t r = 0; r < static_cast<int32_t>(replica_live.size()); ++r) {
    if (replica_live[r] && ReplicaBound(r)) ++n;
  }
  return n;
}

int32_t GroupState::BoundPods() const {
  int32_t n = 0;
  for (NodeId node : slot_node) n += node.valid();
  return n;
}

void Workload::ResetGroupOrder() {
  group_order.clear();
  for (uint32_t g = 0; g < groups.size(); ++g) {
    if (IsHead(g)) group_order.push_back(g);
  }
  for (uint32_t g = 0; g < groups.size(); ++g) {
    if (!IsHead(g)) group_order.push_back(g);
  }
}

std::vector<std::pair<uint32_t, int32_t>> Workload::EvictableSlots() const {
  std::vector<std::pair<uint32_t, int32_t>> out;
  for (bool head_pass : {false, true}) {
    for (uint32_t g : group_order) {
      if (IsHead(g) != head_pass) continue;
      const GroupState& state = groups[g];
      for (int32_t i = static_cast<int32_t>(state.slot_node.size()) - 1; i >= 0;
           --i) {
        if (state.slot_node[i].valid() && !state.slot_evicting[i])
          out.emplace_back(g, i);
      }
    }
  }
  return out;
}

bool Workload::AtMinimum() const {
  for (const auto& group : groups) {
    if (group.BoundReplicas() < group.min_replicas) return false;
  }
  return true;
}

int32_t Workload::BoundPods() const {
  int32_t n = 0;
  for (const auto& group : groups) n += group.BoundPods();
  return n;
}

ResourceVector Workload::BoundResources() const {
  ResourceVector total;
  for (const auto& group : groups) total += group.pod * group.BoundPods();
  return total;
}

std::vector<std::vector<std::pair<uint32_t, int32_t>>>
Workload::ElasticReplicas() const {
  std::vector<std::vector<std::pair<uint32_t, int32_t>>> out;
  for (auto it = group_order.rbegin(); it != group_order.rend(); ++it) {
    uint32_t g = *it;
    const GroupState& state = groups[g];
    int32_t h = state.pods_per_replica;
    int32_t excess = state.BoundReplicas() - state.min_replicas;
    for (int32_t r = static_cast<int32_t>(state.replica_live.size()) - 1;
         r >= 0 && excess > 0; --r) {
      if (!state.replica_live[r] || !state.ReplicaBound(r)) continue;
      bool evicting = false;
      for (int32_t p = 0; p < h; ++p)
        evicting |= state.slot_evicting[r * h + p] != 0;
      --excess;  // an evicting replica still counts as above the minimum
      if (evicting) continue;
      std::vector<std::pair<uint32_t, int32_t>> replica;
      for (int32_t p = 0; p < h; ++p) replica.emplace_back(g, r * h + p);
      out.push_back(std::move(replica));
    }
  }
  return out;
}

bool Workload::Settled() const {
  if (state != WorkloadState::kRunning || pending.code != PendingCode::kNone ||
      !pending.message.empty() || below_min_since != absl::InfiniteFuture()) {
    return false;
  }
  for (const GroupState& g : groups) {
    if (g.BoundPods() != g.LivePods()) return false;
    for (int32_t r = 0; r < static_cast<int32_t>(g.replica_live.size()); ++r) {
      if (g.replica_live[r] && !g.ReplicaBound(r)) return false;
    }
  }
  return AtMinimum();
}

}  // namespace gangsched
